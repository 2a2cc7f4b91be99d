'use strict'

const { expect } = require('chai')
const fs = require('node:fs')
const path = require('node:path')
const { LevelDb } = require('../lib/leveldb')
const { useTmp, rejects, bytes, collect } = require('./helpers')

const C = 1024

// Applies fn(db, chunkKeys) to the one shard of a closed store holding a single file.
async function tamper (storeDir, fn) {
  const shard = fs.readdirSync(storeDir).find((d) => /^\d{3}\.s$/.test(d))
  const db = await LevelDb.open(path.join(storeDir, shard))
  try {
    const it = db.iterator({ gt: '0', lt: 'g', values: false })
    const keys = []
    for (let e = await it.next(); e; e = await it.next()) keys.push(e.key)
    await it.end()
    await fn(db, keys)
  } finally {
    await db.close()
  }
}

describe('integrity', () => {
  const t = useTmp()
  const data = bytes(6 * C + 100)

  async function storeWithFile () {
    const store = t.open({ chunkSize: C })
    await store.writeFile('f', data)
    await store.close()
    return store.location
  }

  it('a flipped byte fails a full read with EINTEGRITY and returns no bytes', async () => {
    const dir = await storeWithFile()
    await tamper(dir, async (db, keys) => {
      const value = Buffer.from(await db.get(keys[3]))
      value[17] ^= 0xff
      await db.put(keys[3], value)
    })
    const store = t.open()
    const err = await rejects(store.readFile('f'), 'EINTEGRITY')
    expect(err).to.include({ expected: require('./helpers').sha256(data) })
    expect(err.found).to.match(/^[0-9a-f]{64}$/)
    const received = []
    const rs = store.createReadStream('f')
    rs.on('data', (d) => received.push(d))
    await rejects(new Promise((resolve, reject) => rs.on('end', resolve).on('error', reject)), 'EINTEGRITY')
    expect(Buffer.concat(received).length).to.be.below(data.length) // the last chunk is withheld
    // Range reads check chunk indexes and lengths, not the hash: an undamaged range reads.
    expect(Buffer.concat(await collect(store.createReadStream('f', { start: 0, end: C - 1 }))).equals(data.subarray(0, C))).to.equal(true)
  })

  it('a large file hashed on the digest thread fails with EINTEGRITY too', async () => {
    const big = bytes(5 * 1024 * 1024 + 3, 'big') // above the size readFile hands to the thread
    const store = t.open()
    await store.writeFile('big', big)
    expect((await store.readFile('big')).equals(big)).to.equal(true)
    await store.close()
    await tamper(store.location, async (db, keys) => {
      const value = Buffer.from(await db.get(keys[20]))
      value[0] ^= 1
      await db.put(keys[20], value)
    })
    const again = t.open()
    await rejects(again.readFile('big'), 'EINTEGRITY')
    await rejects(collect(again.createReadStream('big')), 'EINTEGRITY')
    await rejects(again.readFile('big'), 'EINTEGRITY') // the thread keeps serving after a failure
  })

  it('a missing chunk fails full and range reads over it with EINTEGRITY', async () => {
    const dir = await storeWithFile()
    await tamper(dir, (db, keys) => db.batch([{ type: 'del', key: keys[2] }]))
    const store = t.open()
    const err = await rejects(store.readFile('f'), 'EINTEGRITY')
    expect(err.message).to.contain('chunk 2 is missing')
    await rejects(collect(store.createReadStream('f', { start: C, end: 3 * C })), 'EINTEGRITY')
    await rejects(collect(store.createReadStream('f', { start: 2 * C })), 'EINTEGRITY')
  })

  it('a truncated chunk fails with EINTEGRITY', async () => {
    const dir = await storeWithFile()
    await tamper(dir, async (db, keys) => db.put(keys[6], (await db.get(keys[6])).subarray(0, 10)))
    const store = t.open()
    const err = await rejects(store.readFile('f'), 'EINTEGRITY')
    expect(err.message).to.contain('chunk 6 holds 10 bytes, 100 expected')
  })

  it('unreadable metadata is ECORRUPT', async () => {
    const dir = await storeWithFile()
    await tamper(dir, (db) => db.put('!m!' + require('../lib/keys').coerceKey('f').key, '{not json'))
    const store = t.open()
    await rejects(store.readFile('f'), 'ECORRUPT')
    await rejects(store.stat('f'), 'ECORRUPT')
  })
})

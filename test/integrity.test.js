'use strict'

const { expect } = require('chai')
const fs = require('node:fs')
const path = require('node:path')
const { LevelDb } = require('../lib/leveldb/leveldb')
const { useTmp, rejects, bytes, collect, killingDigestThread } = require('./helpers')

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

  it('a flipped bit in one chunk on disk fails every read over that chunk with EINTEGRITY naming it; the others read', async () => {
    const dir = await storeWithFile()
    // The chunks into a table file, then one bit of chunk 3's data flipped in that file:
    // LevelDB reads it back without complaint (it checks no block checksums on reads).
    await tamper(dir, (db) => db.compactRange('!', '\xff'))
    const shard = fs.readdirSync(dir).find((d) => /^\d{3}\.s$/.test(d))
    const table = fs.readdirSync(path.join(dir, shard)).filter((f) => f.endsWith('.ldb'))
      .map((f) => path.join(dir, shard, f)).sort((a, b) => fs.statSync(b).size - fs.statSync(a).size)[0]
    const raw = fs.readFileSync(table)
    const at = raw.indexOf(data.subarray(3 * C + 100, 3 * C + 164))
    expect(at).to.be.above(0)
    raw[at + 10] ^= 0x04
    fs.writeFileSync(table, raw)

    const store = t.open()
    const key = require('../lib/api/keys').coerceKey('f').key
    const damaged = async (read) => {
      const err = await rejects(read, 'EINTEGRITY')
      expect(err).to.include({ key, chunk: 3 })
      expect(err.message).to.contain(key).and.to.contain('chunk 3')
    }
    await damaged(store.readFile('f'))
    await damaged(collect(store.createReadStream('f', { start: 3 * C + 100, end: 3 * C + 100 })))
    await damaged(collect(store.createReadStream('f', { start: 2 * C, end: 4 * C })))
    // A stream hands out the chunks before the damaged one, never a byte of it.
    const received = []
    const rs = store.createReadStream('f')
    rs.on('data', (d) => received.push(d))
    await damaged(new Promise((resolve, reject) => rs.on('end', resolve).on('error', reject)))
    expect(Buffer.concat(received).equals(data.subarray(0, Buffer.concat(received).length))).to.equal(true)
    expect(Buffer.concat(received).length).to.be.at.most(3 * C)
    // Ranges over other chunks read.
    for (const [start, end] of [[0, 3 * C - 1], [4 * C, data.length - 1], [C + 5, 2 * C + 7]]) {
      expect(Buffer.concat(await collect(store.createReadStream('f', { start, end }))).equals(data.subarray(start, end + 1))).to.equal(true)
    }
    const report = await store.verify()
    expect(report.problems).to.have.length(1)
    expect(report.problems[0]).to.include({ key, kind: 'file' })
    expect(report.problems[0].problem).to.contain('chunk 3')
  })

  it('a chunk stored under another chunk\'s key fails with EINTEGRITY: the digest covers the key', async () => {
    const dir = await storeWithFile()
    await tamper(dir, async (db, keys) => db.put(keys[2], await db.get(keys[1])))
    const store = t.open()
    expect((await rejects(store.readFile('f'), 'EINTEGRITY')).chunk).to.equal(2)
    expect((await rejects(collect(store.createReadStream('f', { start: 2 * C, end: 2 * C })), 'EINTEGRITY')).chunk).to.equal(2)
  })

  it('the whole-file SHA-256 is still checked by verify(): a chunk rewritten with a matching digest is found', async () => {
    const dir = await storeWithFile()
    const { seal } = require('../lib/shard/chunk-record')
    await tamper(dir, async (db, keys) => {
      const value = Buffer.from(await db.get(keys[4]))
      value[40] ^= 1
      await db.put(keys[4], seal(keys[4], value)) // damage that kept a right digest
    })
    const store = t.open()
    const report = await store.verify()
    expect(report.problems).to.have.length(1)
    expect(report.problems[0].problem).to.contain('SHA-256')
  })

  it('a large file, its chunks checked on the digest thread by readFile, fails with EINTEGRITY naming the chunk', async () => {
    const big = bytes(5 * 1024 * 1024 + 3, 'big') // above the size readFile checks on the thread
    const store = t.open()
    await store.writeFile('big', big)
    expect((await store.readFile('big')).equals(big)).to.equal(true)
    await store.close()
    await tamper(store.location, async (db, keys) => {
      const value = Buffer.from(await db.get(keys[20]))
      value[100] ^= 1
      await db.put(keys[20], value)
    })
    const again = t.open()
    expect((await rejects(again.readFile('big'), 'EINTEGRITY')).chunk).to.equal(20)
    expect((await rejects(again.readFile('big'), 'EINTEGRITY')).chunk).to.equal(20) // the thread keeps serving
    expect((await rejects(collect(again.createReadStream('big')), 'EINTEGRITY')).chunk).to.equal(20)
  })

  it('readFile reads again, checking on its own thread, when the digest thread dies mid-check', async () => {
    const big = bytes(6 * 1024 * 1024 + 5, 'big')
    const store = t.open()
    await store.writeFile('big', big)
    const calls = await killingDigestThread('checkChunks', 2, async () => expect((await store.readFile('big')).equals(big)).to.equal(true))
    expect(calls).to.be.above(2)
    expect((await store.readFile('big')).equals(big)).to.equal(true) // a new thread starts
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
    await tamper(dir, async (db, keys) => db.put(keys[6], (await db.get(keys[6])).subarray(0, 14)))
    const store = t.open()
    const err = await rejects(store.readFile('f'), 'EINTEGRITY')
    expect(err.message).to.contain('chunk 6 holds 10 bytes, 100 expected')
  })

  it('unreadable metadata is ECORRUPT', async () => {
    const dir = await storeWithFile()
    await tamper(dir, (db) => db.put('!m!' + require('../lib/api/keys').coerceKey('f').key, '{not json'))
    const store = t.open()
    await rejects(store.readFile('f'), 'ECORRUPT')
    await rejects(store.stat('f'), 'ECORRUPT')
  })

  describe('a file of one chunk, which readFile reads with one get after its metadata', () => {
    const small = bytes(700, 'small')

    async function storeWithSmallFile () {
      const store = t.open({ chunkSize: C })
      await store.writeFile('s', small)
      expect((await store.readFile('s')).equals(small)).to.equal(true)
      await store.close()
      return store.location
    }

    it('a flipped bit fails with EINTEGRITY naming chunk 0, as a range read does', async () => {
      const dir = await storeWithSmallFile()
      await tamper(dir, async (db, keys) => {
        const value = Buffer.from(await db.get(keys[0]))
        value[300] ^= 1
        await db.put(keys[0], value)
      })
      const store = t.open()
      expect(await rejects(store.readFile('s'), 'EINTEGRITY')).to.include({ chunk: 0 })
      expect(await rejects(collect(store.createReadStream('s', { start: 10, end: 20 })), 'EINTEGRITY')).to.include({ chunk: 0 })
    })

    it('a missing or truncated chunk fails with EINTEGRITY', async () => {
      const dir = await storeWithSmallFile()
      await tamper(dir, async (db, keys) => db.put(keys[0], (await db.get(keys[0])).subarray(0, 104)))
      let store = t.open()
      expect((await rejects(store.readFile('s'), 'EINTEGRITY')).message).to.contain('chunk 0 holds 100 bytes, 700 expected')
      await store.close()
      await tamper(dir, (db, keys) => db.batch([{ type: 'del', key: keys[0] }]))
      store = t.open()
      expect((await rejects(store.readFile('s'), 'EINTEGRITY')).message).to.contain('chunk 0 is missing')
    })

    it('metadata saying no chunks for 700 bytes fails with EINTEGRITY, not an empty file', async () => {
      const dir = await storeWithSmallFile()
      const metaKey = '!m!' + require('../lib/api/keys').coerceKey('s').key
      await tamper(dir, async (db) => db.put(metaKey, JSON.stringify({ ...JSON.parse(await db.get(metaKey)), chunks: 0 })))
      const store = t.open()
      await rejects(store.readFile('s'), 'EINTEGRITY')
    })

    it('an empty file reads as an empty Buffer', async () => {
      const store = t.open({ chunkSize: C })
      await store.writeFile('e', Buffer.alloc(0))
      const read = await store.readFile('e')
      expect(Buffer.isBuffer(read) && read.length).to.equal(0)
    })
  })

  describe('a version replaced while readFile reads it', () => {
    const { LevelDb } = require('../lib/leveldb/leveldb')
    const { Files } = require('../lib/data/files')
    const restore = []
    afterEach(() => restore.splice(0).forEach((fn) => fn()))

    function patch (object, name, wrap) {
      const original = object[name]
      object[name] = wrap(original)
      restore.push(() => { object[name] = original })
    }

    it('a file of one chunk replaced between its metadata and its chunk is read again, whole', async () => {
      const store = t.open({ chunkSize: C })
      const [v1, v2] = [bytes(600, 'one'), bytes(900, 'two')]
      await store.writeFile('s', v1)
      let replaced = false
      patch(LevelDb.prototype, 'get', (get) => async function (key) {
        if (!replaced && !key.startsWith('!')) { // the first chunk get: overwrite the file before it
          replaced = true
          await store.writeFile('s', v2)
        }
        return get.call(this, key)
      })
      expect((await store.readFile('s')).equals(v2)).to.equal(true)
      expect(replaced).to.equal(true)
    })

    it('a larger file is read on one lease of its shard: the metadata and the chunks', async () => {
      const { Shards } = require('../lib/shard/shards')
      const store = t.open({ chunkSize: C })
      const data = bytes(5 * C + 1, 'big')
      await store.writeFile('f', data)
      let leases = 0
      patch(Shards.prototype, 'lease', (lease) => function (...args) {
        leases++
        return lease.apply(this, args)
      })
      expect((await store.readFile('f')).equals(data)).to.equal(true)
      expect(leases).to.equal(1)
    })

    it('a larger file replaced after readFile read its metadata is read again, whole', async () => {
      const store = t.open({ chunkSize: C })
      const [v1, v2] = [bytes(5 * C + 1, 'one'), bytes(3 * C + 7, 'two')]
      await store.writeFile('f', v1)
      let replaced = false
      patch(Files.prototype, 'openReader', (openReader) => async function (...args) {
        if (!replaced) {
          replaced = true
          await store.writeFile('f', v2)
        }
        return openReader.apply(this, args)
      })
      expect((await store.readFile('f')).equals(v2)).to.equal(true)
      expect(replaced).to.equal(true)
    })
  })
})

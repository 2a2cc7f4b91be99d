'use strict'

const { expect } = require('chai')
const fs = require('node:fs')
const path = require('node:path')
const { LevelDb } = require('../lib/leveldb/leveldb')
const zlib = require('node:zlib')
const { useTmp, rejects, bytes, collect, killingDigestThread, toFormat2, assertNoStrayChunks } = require('./helpers')
const { encodeHead, decodeHead } = require('../lib/shard/head-record')

const C = 1024

// Applies fn(db, chunkKeys, headKey) to the one shard of a closed store holding a single
// file.
// The shard directory of the store's one file: the one with the most bytes in its
// tables and logs (the store makes its other shards ahead, empty).
function fileShard (storeDir) {
  const bytes = (shard) => fs.readdirSync(path.join(storeDir, shard)).filter((f) => /\.(ldb|log)$/.test(f))
    .reduce((sum, f) => sum + fs.statSync(path.join(storeDir, shard, f)).size, 0)
  const shards = fs.readdirSync(storeDir).filter((d) => /^\d{3}\.s$/.test(d)).map((shard) => [shard, bytes(shard)])
  return shards.sort((a, b) => b[1] - a[1])[0][0]
}

async function tamper (storeDir, fn) {
  const shard = fileShard(storeDir)
  const db = await LevelDb.open(path.join(storeDir, shard))
  try {
    const it = db.iterator({ gt: '0', lt: 'g', values: false })
    const keys = []
    let head
    for (let e = await it.next(); e; e = await it.next()) {
      if (e.key.includes(' ')) keys.push(e.key)
      else head = e.key
    }
    await it.end()
    await fn(db, keys, head)
  } finally {
    await db.close()
  }
}

// Rewrites the head record `key` with change(meta) (its data kept), sealed anew.
async function rewriteHead (db, key, change) {
  const { meta, data } = decodeHead(key, await db.get(key))
  await db.put(key, encodeHead(key, change(meta), data))
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
    const shard = fileShard(dir)
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

  it('unreadable metadata is ECORRUPT; the file still reads, from its head record', async () => {
    const dir = await storeWithFile()
    const key = require('../lib/api/keys').coerceKey('f').key
    await tamper(dir, (db) => db.put('!m!' + key, '{not json'))
    const store = t.open()
    await rejects(store.stat('f'), 'ECORRUPT')
    expect((await store.readFile('f')).equals(data)).to.equal(true)
    expect((await store.verify()).problems.map((p) => `${p.kind} ${p.key}`)).to.include(`metadata ${key}`)
  })

  it('a format 2 file (no head record) reads, streams and verifies; written again, it has a head and one chunk record fewer', async () => {
    const store = t.open({ chunkSize: C })
    await store.writeFile('f', data)
    await store.writeFile('s', data.subarray(0, 700))
    await store.close()
    await toFormat2(store.location)
    const again = t.open({ chunkSize: C })
    expect((await again.readFile('f')).equals(data)).to.equal(true)
    expect((await again.readFile('s')).equals(data.subarray(0, 700))).to.equal(true)
    expect(Buffer.concat(await collect(again.createReadStream('f', { start: C + 5, end: 3 * C }))).equals(data.subarray(C + 5, 3 * C + 1))).to.equal(true)
    expect((await again.verify()).problems).to.deep.equal([])
    await again.writeFile('s', 'new')
    expect(String(await again.readFile('s'))).to.equal('new')
    await again.close()
    await assertNoStrayChunks(path.dirname(store.location))
  })

  it('the head record of an older version left behind by an overwrite is damage that verify names', async () => {
    const store = t.open({ chunkSize: C })
    await store.writeFile('s', 'one')
    await store.close()
    let old
    await tamper(store.location, async (db, keys, head) => { old = await db.get(head) })
    const again = t.open({ chunkSize: C })
    await again.writeFile('s', 'two')
    await again.close()
    await tamper(store.location, (db, keys, head) => db.put(head, old))
    const [problem] = (await t.open().verify()).problems
    expect(problem).to.include({ kind: 'file' })
    expect(problem.problem).to.match(/its head record is of version [0-9a-f]{16}, its metadata record of [0-9a-f]{16}/)
  })

  it('a head record left without its metadata record is named by verify, and unlink removes it', async () => {
    const dir = await storeWithFile()
    const key = require('../lib/api/keys').coerceKey('f').key
    let headBytes
    await tamper(dir, async (db, keys, head) => {
      headBytes = (await db.get(head)).length
      await db.batch([{ type: 'del', key: '!m!' + key }])
    })
    const store = t.open()
    expect((await store.readFile('f')).equals(data)).to.equal(true) // a read trusts the head
    await rejects(store.stat('f'), 'ENOENT')
    const problems = (await store.verify()).problems
    expect(problems.find((p) => p.key === key).problem).to.contain('its head record has no metadata record')
    await store.unlink('f')
    await rejects(store.readFile('f'), 'ENOENT')
    expect((await store.verify()).problems.filter((p) => p.key === key)).to.deep.equal([])
    await store.close()
    // The head's space is noted for reclaiming, as a removed version's.
    await tamper(dir, async (db) => {
      const notes = []
      const it = db.iterator({ gte: `!x!${key} `, lt: `!x!${key}!` })
      for (let e = await it.next(); e; e = await it.next()) notes.push(String(e.value))
      await it.end()
      expect(notes).to.deep.equal([String(headBytes)])
    })
  })

  it('a head record with a trash mark its metadata record lacks: reads find no file, verify names the disagreement', async () => {
    const dir = await storeWithFile()
    await tamper(dir, (db, keys, head) => rewriteHead(db, head, (meta) => ({ ...meta, trashed: Date.now() })))
    const store = t.open()
    await rejects(store.readFile('f'), 'ENOENT')
    const [problem] = (await store.verify()).problems
    expect(problem.problem).to.contain('its head record and its metadata record disagree on trashed')
  })

  it('a head record whose trash flag and trash time contradict each other is EINTEGRITY', async () => {
    const dir = await storeWithFile()
    await tamper(dir, async (db, keys, head) => {
      const record = Buffer.from(await db.get(head))
      record[5] |= 2 // the flag, with no time
      await db.put(head, require('../lib/shard/chunk-record').seal(head, record))
    })
    const err = await rejects(t.open().readFile('f'), 'EINTEGRITY')
    expect(err.message).to.contain('trash flag and time that contradict')
  })

  it('a head record and a metadata record that disagree are damage that verify names', async () => {
    const dir = await storeWithFile()
    await tamper(dir, (db, keys, head) => rewriteHead(db, head, (meta) => ({ ...meta, mtime: meta.mtime + 1 })))
    const store = t.open()
    const [problem] = (await store.verify()).problems
    expect(problem).to.include({ kind: 'file' })
    expect(problem.problem).to.contain('its head record and its metadata record disagree on mtime')
  })

  describe('a file of one chunk, which a read reads with one get: its head record holds its data', () => {
    const small = bytes(700, 'small')

    async function storeWithSmallFile () {
      const store = t.open({ chunkSize: C })
      await store.writeFile('s', small)
      expect((await store.readFile('s')).equals(small)).to.equal(true)
      await store.close()
      return store.location
    }

    it('is one record, under the file key: its head, sealed with the CRC32 of its key and the rest (doc/format.md)', async () => {
      const dir = await storeWithSmallFile()
      const { HEAD_FIELDS } = require('../lib/shard/head-record')
      await tamper(dir, async (db, keys, head) => {
        expect(keys, 'no chunk record').to.deep.equal([])
        expect(head).to.equal(require('../lib/api/keys').coerceKey('s').key)
        const value = await db.get(head)
        expect(value.length).to.equal(HEAD_FIELDS + small.length)
        expect(value.readUInt32BE(0)).to.equal(zlib.crc32(value.subarray(4), zlib.crc32(head)))
        expect(value[4]).to.equal(3)
        expect(value.subarray(HEAD_FIELDS).equals(small)).to.equal(true)
      })
    })

    it('a flipped bit fails every read with EINTEGRITY naming chunk 0', async () => {
      const dir = await storeWithSmallFile()
      await tamper(dir, async (db, keys, head) => {
        const value = Buffer.from(await db.get(head))
        value[300] ^= 1
        await db.put(head, value)
      })
      const store = t.open()
      expect(await rejects(store.readFile('s'), 'EINTEGRITY')).to.include({ chunk: 0 })
      expect(await rejects(collect(store.createReadStream('s', { start: 10, end: 20 })), 'EINTEGRITY')).to.include({ chunk: 0 })
      expect((await store.verify()).problems[0].problem).to.contain('its head record does not match its CRC32')
    })

    it('a missing or truncated head record fails with EINTEGRITY', async () => {
      const dir = await storeWithSmallFile()
      await tamper(dir, async (db, keys, head) => db.put(head, (await db.get(head)).subarray(0, 104)))
      let store = t.open()
      expect((await rejects(store.readFile('s'), 'EINTEGRITY')).message).to.contain('its head record does not match its CRC32')
      await store.close()
      await tamper(dir, (db, keys, head) => db.batch([{ type: 'del', key: head }]))
      store = t.open()
      expect((await rejects(store.readFile('s'), 'EINTEGRITY')).message).to.contain('its head record is missing')
      expect((await rejects(collect(store.createReadStream('s')), 'EINTEGRITY')).message).to.contain('its head record is missing')
    })

    it('a head saying no chunks for 700 bytes fails with EINTEGRITY, not an empty file', async () => {
      const dir = await storeWithSmallFile()
      await tamper(dir, (db, keys, head) => rewriteHead(db, head, (meta) => ({ ...meta, chunks: 0 })))
      const store = t.open()
      expect((await rejects(store.readFile('s'), 'EINTEGRITY')).message).to.contain('its head record holds fields that contradict each other')
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

    it('a read whose head get found nothing while the file was being written reads it, not damage', async () => {
      const store = t.open({ chunkSize: C })
      const v = bytes(600, 'one')
      await store.writeFile('s', v)
      await store.unlink('s') // its shard exists
      const key = require('../lib/api/keys').coerceKey('s').key
      let written = false
      patch(LevelDb.prototype, 'get', (get) => async function (k) {
        const value = await get.call(this, k)
        if (!written && k === key) { // the file is committed between its head get and its metadata get
          written = true
          await store.writeFile('s', v)
        }
        return value
      })
      // Its metadata is then of a version with a head: the head is read again.
      expect((await store.readFile('s')).equals(v)).to.equal(true)
      expect(written).to.equal(true)
    })

    it('a file of one chunk replaced or removed while it is read is read whole, or ENOENT', async () => {
      const store = t.open({ chunkSize: C })
      const [v1, v2] = [bytes(600, 'one'), bytes(900, 'two')]
      await store.writeFile('s', v1)
      const key = require('../lib/api/keys').coerceKey('s').key
      let change
      patch(LevelDb.prototype, 'get', (get) => async function (k) {
        if (change && k === key) {
          const run = change
          change = undefined
          await run()
        }
        return get.call(this, k)
      })
      change = () => store.writeFile('s', v2)
      expect((await store.readFile('s')).equals(v2)).to.equal(true)
      change = () => store.unlink('s')
      await rejects(store.readFile('s'), 'ENOENT')
    })

    it('a larger file is read on one lease of its shard: the metadata and the chunks', async () => {
      const { Shards } = require('../lib/shard/shards')
      const store = t.open({ chunkSize: C })
      const data = bytes(5 * C + 1, 'big')
      await store.writeFile('f', data)
      let leases = 0
      for (const method of ['lease', 'leaseOpen']) {
        patch(Shards.prototype, method, (lease) => function (...args) {
          const taken = lease.apply(this, args)
          if (taken) leases++ // leaseOpen: undefined when the shard is not open now
          return taken
        })
      }
      expect((await store.readFile('f')).equals(data)).to.equal(true)
      expect(leases).to.equal(1)
    })

    it('a larger file removed after readFile read its head is ENOENT, not a missing chunk', async () => {
      const store = t.open({ chunkSize: C })
      await store.writeFile('f', bytes(5 * C + 1, 'one'))
      let removed = false
      patch(Files.prototype, 'openReader', (openReader) => async function (...args) {
        if (!removed) {
          removed = true
          await store.unlink('f')
        }
        return openReader.apply(this, args)
      })
      await rejects(store.readFile('f'), 'ENOENT')
      expect(removed).to.equal(true)
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

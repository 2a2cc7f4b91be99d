'use strict'

// Format 2 (a digest in every chunk record) reads stores that format 1 made: their
// files read and verify as before, and the store's new writes use the new records.
const { expect } = require('chai')
const fs = require('node:fs')
const path = require('node:path')
const zlib = require('node:zlib')
const { spawnSync } = require('node:child_process')
const { LevelDb } = require('../lib/leveldb/leveldb')
const { coerceKey } = require('../lib/api/keys')
const { shardFor } = require('../lib/shard/routing')
const { shardDirName } = require('../lib/base/shard-names')
const { useTmp, rejects, bytes, sha256, collect, toFormat1, toFormat2, killingDigestThread, assertNoStrayChunks } = require('./helpers')

const FIXTURE = path.join(__dirname, 'fixtures', 'format-1')
const BIN = path.join(__dirname, '..', 'bin', 'kfs.js')
// What test/fixtures/format-1.make.js stored, made by kfs at commit a46a3c9.
const seeded = (n, seed) => {
  const out = Buffer.alloc(n)
  let h = Buffer.from(seed)
  for (let o = 0; o < n; o += 32) {
    h = require('node:crypto').createHash('sha256').update(h).digest()
    h.copy(out, o)
  }
  return out
}
const MULTI = seeded(6 * 1024 + 100, 'multi')
const PUT = seeded(3000, 'put')

const readFormat = (dir) => JSON.parse(fs.readFileSync(path.join(dir, 'format.json'), 'utf8'))

async function rawMeta (dir, key) {
  for (const shard of fs.readdirSync(dir).filter((d) => /^\d{3}\.s$/.test(d))) {
    const db = await LevelDb.open(path.join(dir, shard))
    try {
      const raw = await db.get('!m!' + key)
      if (raw) return JSON.parse(raw)
    } finally {
      await db.close()
    }
  }
}

// The chunk records of `key` in the closed store at dir, in order, as stored.
async function rawChunks (dir, key) {
  for (const shard of fs.readdirSync(dir).filter((d) => /^\d{3}\.s$/.test(d))) {
    const db = await LevelDb.open(path.join(dir, shard))
    try {
      const it = db.iterator({ gt: `${key} `, lt: `${key} ~` })
      const entries = []
      for (let e = await it.next(); e; e = await it.next()) entries.push({ key: e.key, value: Buffer.from(e.value) })
      await it.end()
      if (entries.length) return entries
    } finally {
      await db.close()
    }
  }
  return []
}

// Flips one byte of chunk `index` of `key` in the closed store at dir, as stored.
async function flipChunkByte (dir, key, index, at = 5) {
  for (const shard of fs.readdirSync(dir).filter((d) => /^\d{3}\.s$/.test(d))) {
    const db = await LevelDb.open(path.join(dir, shard))
    try {
      const it = db.iterator({ gt: `${key} `, lt: `${key} ~` })
      const entries = []
      for (let e = await it.next(); e; e = await it.next()) entries.push(e)
      await it.end()
      const entry = entries.find((e) => Number(e.key.split(' ')[2]) === index)
      if (!entry) continue
      const value = Buffer.from(entry.value)
      value[at] ^= 0xff
      await db.put(entry.key, value)
      return
    } finally {
      await db.close()
    }
  }
  throw new Error(`no chunk ${index} of ${key}`)
}

describe('on-disk format', () => {
  const t = useTmp()

  function fixtureCopy () {
    const dir = path.join(t.dir, 'format-1')
    fs.cpSync(FIXTURE, dir, { recursive: true })
    return dir
  }

  it('a chunk record is the big-endian CRC32 of its key then its data, then the data (doc/format.md)', async () => {
    const C = 64 * 1024
    const store = t.open({ chunkSize: C })
    const large = bytes(24 * C + 7) // past 1 MiB: chunks written before the commit
    const medium = bytes(3 * C + 5) // in the commit batch
    await store.writeFile('large', large)
    await store.writeFile('medium', medium)
    await store.close()
    for (const [key, data] of [[coerceKey('large').key, large], [coerceKey('medium').key, medium]]) {
      const records = await rawChunks(store.location, key)
      expect(records.length).to.equal(Math.ceil(data.length / C))
      records.forEach((record, i) => {
        const piece = data.subarray(i * C, (i + 1) * C)
        const digest = Buffer.alloc(4)
        digest.writeUInt32BE(zlib.crc32(piece, zlib.crc32(record.key)))
        expect(record.value.equals(Buffer.concat([digest, piece])), `chunk ${i} of ${key}`).to.equal(true)
      })
    }
  })

  it('new stores are format 3: every file written has chunk digests and a head record, whose data it holds if it is one chunk written whole', async () => {
    const store = t.open()
    await store.writeFile('f', bytes(300 * 1024))
    await store.writeFile('s', bytes(700))
    await store.writeFile('e', '')
    await store.close()
    expect(readFormat(store.location).format).to.equal(3)
    expect(await rawMeta(store.location, coerceKey('f').key)).to.include({ chunkDigest: 'crc32', format: 3 }).and.not.have.property('inline')
    expect(await rawMeta(store.location, coerceKey('s').key)).to.include({ chunkDigest: 'crc32', format: 3, inline: true })
    expect(await rawMeta(store.location, coerceKey('e').key)).to.include({ chunkDigest: 'crc32', format: 3, inline: true })
    expect(await rawChunks(store.location, coerceKey('s').key)).to.deep.equal([])
  })

  it('a store made by format 2 opens, reads and verifies, and is upgraded to format 3', async () => {
    const store = t.open({ chunkSize: 1024 })
    await store.writeFile('multi', MULTI)
    await store.writeFile('small', 'a small file')
    await store.close()
    await toFormat2(store.location)
    const before = readFormat(store.location)
    expect(before.format).to.equal(2)
    const again = t.open()
    expect((await again.readFile('multi')).equals(MULTI)).to.equal(true)
    expect((await again.readFile('small')).toString()).to.equal('a small file')
    expect(await again.verify()).to.deep.include({ files: 2, problems: [] })
    expect(readFormat(store.location)).to.include({ format: 3, referenceId: before.referenceId }).and.have.property('upgraded')
    await again.writeFile('small', 'written again')
    await again.close()
    expect(await rawMeta(store.location, coerceKey('small').key)).to.include({ format: 3, inline: true })
    expect(await rawMeta(store.location, coerceKey('multi').key)).to.include({ format: 3 }) // given a head in the background
  })

  it('an upgraded store\'s files of format 2 get head records in the background, each shard then marked as needing no more', async () => {
    const C = 1024
    const store = t.open({ chunkSize: C, shardCount: 4 })
    const files = { one: bytes(700, 'one'), multi: bytes(3 * C + 5, 'multi'), empty: Buffer.alloc(0), whole: bytes(C, 'whole') }
    for (const [name, data] of Object.entries(files)) await store.writeFile(name, data)
    await store.close()
    await toFormat2(store.location)
    const again = t.open({ chunkSize: C })
    for (const [name, data] of Object.entries(files)) expect((await again.readFile(name)).equals(data), name).to.equal(true)
    await again.close() // the shards' upgrades end with their close: done or to go on
    // The shards holding the files (the others, made ahead, were never read).
    const holding = new Set(Object.keys(files).map((name) => shardDirName(shardFor(Buffer.from(again.referenceId, 'hex'), coerceKey(name).key, 4))))
    const marked = async () => {
      let all = true
      for (const shard of fs.readdirSync(store.location).filter((d) => holding.has(d))) {
        const db = await LevelDb.open(path.join(store.location, shard))
        all = all && (await db.get('!h')) !== undefined
        await db.close()
      }
      return all
    }
    // Every shard opened for the reads: each was upgraded while open.
    expect(await marked(), 'every shard marked').to.equal(true)
    expect(await rawMeta(store.location, coerceKey('one').key)).to.include({ format: 3, inline: true })
    expect(await rawMeta(store.location, coerceKey('multi').key)).to.include({ format: 3 }).and.not.have.property('inline')
    expect(await rawChunks(store.location, coerceKey('one').key)).to.deep.equal([])
    expect(await rawChunks(store.location, coerceKey('multi').key)).to.have.length(4)
    const third = t.open({ chunkSize: C })
    for (const [name, data] of Object.entries(files)) expect((await third.readFile(name)).equals(data), name).to.equal(true)
    expect(await third.verify()).to.deep.include({ files: 4, problems: [] })
    // A file read is one get of its head.
    const get = LevelDb.prototype.get
    const keys = []
    LevelDb.prototype.get = function (k) { keys.push(k); return get.call(this, k) }
    try {
      await third.readFile('one')
    } finally {
      LevelDb.prototype.get = get
    }
    expect(keys).to.deep.equal([coerceKey('one').key])
    await third.close()
    await assertNoStrayChunks(t.dir)
  })

  describe('the background upgrade of a shard', () => {
    const C = 1024 * 1024
    // One shard of a closed store rewritten as format 2, with `sizes` files, opened alone.
    async function formatTwoShard (sizes) {
      const store = t.open({ chunkSize: C, shardCount: 1 })
      for (const [i, size] of sizes.entries()) await store.writeFile(`f${i}`, bytes(size, `f${i}`))
      await store.close()
      await toFormat2(store.location)
      const { ChunkKeys } = require('../lib/shard/records')
      const location = path.join(store.location, '000.s')
      const open = () => Shard.open({ index: 0, location, cap: 2 ** 40, chunkKeys: new ChunkKeys(2 ** 40, C), sync: false })
      return { store, open }
    }
    const { Shard } = require('../lib/shard/shard')

    it('moves at most about 2 MiB of data a batch, and writes nothing while the disk has no room', async () => {
      const { open } = await formatTwoShard(Array(6).fill(C))
      let shard = await open()
      await shard.upgradeHeads({ room: async () => false })
      expect(shard.allHeads).to.equal(false)
      expect((await shard.getMeta(coerceKey('f0').key)).format).to.equal(undefined)
      await shard.close()
      shard = await open()
      const batches = []
      const batch = shard.db.batch.bind(shard.db)
      shard.db.batch = (ops, options) => {
        batches.push(ops.reduce((n, op) => n + (op.value ? op.value.length : 0), 0))
        return batch(ops, options)
      }
      await shard.upgradeHeads()
      expect(shard.allHeads).to.equal(true)
      expect(batches.length, String(batches)).to.be.at.least(3)
      for (const b of batches) expect(b).to.be.at.most(3 * C + 4096)
      await shard.close()
    })

    it('a batch made but perhaps not durable counts its moved chunks as dead space, and the upgrade stops there', async () => {
      const { open } = await formatTwoShard([3000, 200])
      const shard = await open()
      const { notDurable } = require('../lib/leveldb/leveldb')
      const batch = shard.db.batch.bind(shard.db)
      shard.db.batch = (ops, options) => batch(ops, options).then(() => {
        throw notDurable('shard 000', 0, Object.assign(new Error('EIO: i/o error, fsync'), { code: 'EIO' }))
      })
      await shard.upgradeHeads()
      shard.db.batch = batch
      expect(shard.allHeads, 'marked').to.equal(false)
      expect((await shard.getMeta(coerceKey('f0').key)).format, 'the batch is made').to.equal(3)
      expect(shard.dead).to.equal(3200) // both files' chunks moved into their heads
      await shard.close()
    })

    it('a shard closed before its upgrade went through its files is not marked, and its next open goes on', async () => {
      const { open } = await formatTwoShard(Array(20).fill(100))
      let shard = await open()
      const upgrading = shard.upgradeHeads()
      await shard.close() // before the upgrade's first batch
      await upgrading
      shard = await open()
      expect(shard.allHeads, 'marked').to.equal(false)
      expect((await shard.getMeta(coerceKey('f19').key)).format).to.equal(undefined)
      await shard.upgradeHeads()
      expect(shard.allHeads).to.equal(true)
      expect((await shard.getMeta(coerceKey('f19').key)).format).to.equal(3)
      await shard.close()
    })

    it('a version\'s moved chunk is noted apart: a removal of that version during a reclaim plan keeps its own note', async () => {
      const { open } = await formatTwoShard([3000])
      const shard = await open()
      await shard.upgradeHeads()
      const plan = await shard.reclaimPlan()
      for (const piece of plan.pieces) await shard.compactPiece(piece)
      await shard.unlink(coerceKey('f0').key)
      await shard.forgetDead(plan)
      expect(shard.dead).to.equal(3000) // the removed head's data, still to reclaim
      await shard.close()
    })
  })

  it('a store of format 1 opened read-write has its shards marked: nothing there can be upgraded, and no later open pages through it again', async () => {
    const dir = fixtureCopy()
    const store = t.open(undefined, 'format-1')
    expect((await store.readFile('multi')).equals(MULTI)).to.equal(true)
    expect(await collect(store.list())).to.have.length(4)
    expect((await store.verify()).files).to.equal(4) // opens every shard (a listing reads closed ones from their files)
    await store.close()
    for (const shard of fs.readdirSync(dir).filter((d) => /^\d{3}\.s$/.test(d))) {
      const db = await LevelDb.open(path.join(dir, shard))
      expect(await db.get('!h'), shard).to.not.equal(undefined)
      await db.close()
    }
  })

  it('a read of a format 2 file whose chunk moves into its head meanwhile reads it whole', async () => {
    const store = t.open({ chunkSize: 1024, shardCount: 1 })
    const data = bytes(700, 's')
    await store.writeFile('s', data)
    await store.close()
    await toFormat2(store.location)
    const key = coerceKey('s').key
    const chunkKey = `${key} ${(await rawMeta(store.location, key)).version} `
    const get = LevelDb.prototype.get
    let waited = false
    LevelDb.prototype.get = async function (k) {
      if (!waited && k.startsWith(chunkKey)) { // the read asks for the chunk: let the upgrade move it first
        waited = true
        while ((await get.call(this, key)) === undefined) await new Promise((resolve) => setTimeout(resolve, 5))
      }
      return get.call(this, k)
    }
    try {
      expect((await t.open({ chunkSize: 1024 }).readFile('s')).equals(data)).to.equal(true)
      expect(waited).to.equal(true)
    } finally {
      LevelDb.prototype.get = get
    }
  })

  it('a store of a format above this kfs\'s is refused with ENOTSUP naming it, as format 2 refuses format 3', async () => {
    const store = t.open()
    await store.writeFile('f', 'x')
    await store.close()
    const file = path.join(store.location, 'format.json')
    fs.writeFileSync(file, JSON.stringify({ ...readFormat(store.location), format: 4 }))
    const err = await rejects(t.open().open(), 'ENOTSUP')
    expect(err.message).to.contain('4')
  })

  it('a store made by format 1 opens, reads and verifies, and is upgraded to format 3 for new writes', async () => {
    const dir = fixtureCopy()
    const before = readFormat(dir)
    expect(before.format).to.equal(1)
    const store = t.open(undefined, 'format-1')
    expect((await store.readFile('multi')).equals(MULTI)).to.equal(true)
    expect((await store.readFile('small')).toString()).to.equal('a small file')
    expect((await store.readFile('empty')).length).to.equal(0)
    expect((await store.readFile(sha256(PUT))).equals(PUT)).to.equal(true)
    expect(Buffer.concat(await collect(store.createReadStream('multi', { start: 1000, end: 5000 }))).equals(MULTI.subarray(1000, 5001))).to.equal(true)
    expect((await store.stat('multi')).size).to.equal(MULTI.length)
    expect(await collect(store.list())).to.have.length(4)
    expect(await store.verify()).to.deep.include({ files: 4, problems: [] })
    const after = readFormat(dir)
    expect(after).to.include({ format: 3, referenceId: before.referenceId, chunkSize: 1024, created: before.created })
    expect(after.upgraded).to.be.a('string')

    // New writes use the new records, old files stay as they were and readable.
    await store.writeFile('new', bytes(5000))
    expect(await store.put(PUT)).to.equal(sha256(PUT)) // content already stored
    await store.close()
    expect(await rawMeta(dir, coerceKey('new').key)).to.include({ chunkDigest: 'crc32' })
    expect(await rawMeta(dir, coerceKey('multi').key)).to.not.have.property('chunkDigest')
    const again = t.open(undefined, 'format-1')
    expect((await again.readFile('multi')).equals(MULTI)).to.equal(true)
    expect((await again.readFile('new')).equals(bytes(5000))).to.equal(true)
    expect(await again.verify()).to.deep.include({ files: 5, problems: [] })
  })

  it('a damaged format 1 file: whole reads and verify find it by its SHA-256; range reads are not checked', async () => {
    const dir = fixtureCopy()
    const key = coerceKey('multi').key
    await flipChunkByte(dir, key, 2)
    const store = t.open(undefined, 'format-1')
    const err = await rejects(store.readFile('multi'), 'EINTEGRITY')
    expect(err.message).to.contain('SHA-256')
    await rejects(collect(store.createReadStream('multi')), 'EINTEGRITY')
    // Format 1 kept no chunk digests: a range over the damaged chunk returns its bytes.
    const range = Buffer.concat(await collect(store.createReadStream('multi', { start: 2048, end: 3071 })))
    expect(range.equals(MULTI.subarray(2048, 3072))).to.equal(false)
    const report = await store.verify()
    expect(report.problems).to.have.length(1)
    expect(report.problems[0]).to.include({ key, kind: 'file' })
    expect(report.problems[0].problem).to.contain('SHA-256')
  })

  describe('large format 1 files, hashed on the digest thread by readFile', () => {
    const big = bytes(5 * 1024 * 1024 + 3, 'big') // above the size readFile hands to the thread

    async function format1Store () {
      const store = t.open()
      await store.writeFile('big', big)
      await store.close()
      await toFormat1(store.location)
      return t.open()
    }

    it('read whole, and fail with EINTEGRITY when damaged', async () => {
      const store = await format1Store()
      expect((await store.readFile('big')).equals(big)).to.equal(true)
      await store.close()
      await flipChunkByte(store.location, coerceKey('big').key, 20, 0)
      const again = t.open()
      await rejects(again.readFile('big'), 'EINTEGRITY')
      await rejects(collect(again.createReadStream('big')), 'EINTEGRITY')
      await rejects(again.readFile('big'), 'EINTEGRITY') // the thread keeps serving after a failure
    })

    it('read whole when the thread dies mid-read: the copy is hashed inline', async () => {
      const store = await format1Store()
      const calls = await killingDigestThread('update', 0, async () => expect((await store.readFile('big')).equals(big)).to.equal(true))
      expect(calls).to.be.above(0)
      expect((await store.readFile('big')).equals(big)).to.equal(true) // a new thread starts
    })
  })

  it('kfs get, whole or a range, fails over a damaged chunk, naming it, and writes no file', async () => {
    const store = t.open({ chunkSize: 1024 })
    const data = bytes(8 * 1024)
    await store.writeFile('f', data)
    await store.close()
    await flipChunkByte(store.location, coerceKey('f').key, 5, 100)
    const get = (...args) => spawnSync(process.execPath, [BIN, '-d', store.location, 'get', 'f', ...args], { encoding: 'utf8' })
    for (const args of [[], ['--start', '5000', '--end', '5200']]) {
      const target = path.join(t.dir, 'out')
      const r = get(...args, target)
      expect(r.status, r.stderr).to.equal(1)
      expect(r.stderr).to.contain('is damaged: chunk 5 does not match its CRC32')
      expect(r.stderr).to.not.match(/\n\s+at /) // no stack trace
      expect(fs.existsSync(target)).to.equal(false)
    }
    const r = get('--start', '0', '--end', '4095', path.join(t.dir, 'ok'))
    expect(r.status, r.stderr).to.equal(0)
    expect(fs.readFileSync(path.join(t.dir, 'ok')).equals(data.subarray(0, 4096))).to.equal(true)
  })
})

'use strict'

// Damage is always named, never silent (issue "Correct under every fault", item 3).
const { expect } = require('chai')
const fs = require('node:fs')
const path = require('node:path')
const { LevelDb } = require('../lib/leveldb/leveldb')
const { ChunkWriter } = require('../lib/data/chunk-writer')
const { encodeHead, decodeHead } = require('../lib/shard/head-record')
const { useTmp, rejects, bytes, sha256, collect, keyInShard, REF, killingDigestThread, scaled, runNode } = require('./helpers')
const { shardFor } = require('../lib/shard/routing')
const { coerceKey } = require('../lib/api/keys')
const { shardDirName } = require('../lib/base/shard-names')

const C = 1024
const shardDir = (store, shard) => path.join(store.location, `${String(shard).padStart(3, '0')}.s`)

async function rawDb (dir, fn) {
  const db = await LevelDb.open(dir)
  try {
    return await fn(db)
  } finally {
    await db.close()
  }
}

describe('damage is named', () => {
  const t = useTmp()

  it('a damaged table block met while reading is ECORRUPT naming the shard, and verify reports it', async () => {
    const store = t.open({ chunkSize: C, referenceId: REF })
    const data = bytes(64 * C)
    await store.writeFile('f', data)
    const { key, shard } = await store.stat('f')
    await store.close()
    const dir = shardDir(store, shard)
    await rawDb(dir, (db) => db.compactRange('!', '\xff')) // the chunks in a table file
    // Blocks hold about four 1 KiB chunks and start with a chunk's full key: make the
    // key length of a block in the middle of the file unreadable.
    const table = fs.readdirSync(dir).filter((f) => f.endsWith('.ldb'))
      .map((f) => path.join(dir, f)).sort((a, b) => fs.statSync(b).size - fs.statSync(a).size)[0]
    const buf = fs.readFileSync(table)
    let at = -1
    for (let n = 0; n < 6; n++) at = buf.indexOf(`${key} `, at + 1)
    expect(at).to.be.above(0)
    buf[at - 3] ^= 0x80
    fs.writeFileSync(table, buf)

    const again = t.open()
    const err = await rejects(again.readFile('f'), 'ECORRUPT')
    expect(err.shard).to.equal(shard)
    expect(err.message).to.contain(`shard ${String(shard).padStart(3, '0')}`).and.to.contain(`kfs repair ${shard}`)
    // A range short enough to be read by gets meets the damaged block too.
    expect((await rejects(collect(again.createReadStream('f', { start: 20 * C, end: 40 * C })), 'ECORRUPT')).shard).to.equal(shard)
    const report = await again.verify()
    expect(report.problems).to.have.length.above(0)
    expect(report.problems[0]).to.include({ shard, key, kind: 'file' })
    expect(report.problems[0].problem).to.contain('Corruption')
  })

  it('records that LevelDB drops from a damaged log are noted, and verify names the shard and what was lost', async function () {
    this.timeout(scaled(20000))
    const dir = path.join(t.dir, 'store')
    const first = keyInShard(REF, 7, 'a')
    const last = keyInShard(REF, 7, 'b')
    // A process writes two files and dies without closing: the shard's log holds both.
    // The last is larger than one batch, so its chunks went ahead of its commit.
    await runNode(`
      const store = require('./')(process.argv[1], { chunkSize: ${C}, referenceId: '${REF}' })
      store.writeFile(process.argv[2], Buffer.alloc(${3 * C}, 1))
        .then(() => store.writeFile(process.argv[3], Buffer.alloc(${1.25 * 1024 * 1024}, 2)))
        .then(() => process.exit(0))`, [dir, first, last])
    const log = fs.readdirSync(path.join(dir, '007.s')).filter((f) => f.endsWith('.log')).sort().pop() // the newest
    const file = path.join(dir, '007.s', log)
    const buf = fs.readFileSync(file)
    for (let i = buf.length - 40; i < buf.length - 20; i++) buf[i] ^= 0xff // inside the last commit
    fs.writeFileSync(file, buf)

    const store = t.open()
    expect(await store.exists(first)).to.equal(true)
    expect(await store.exists(last)).to.equal(false) // its commit was dropped
    const report = await store.verify()
    const log7 = report.problems.find((p) => p.kind === 'log')
    expect(log7, JSON.stringify(report)).to.include({ shard: 7, key: null })
    expect(log7.problem).to.match(/dropping \d+ bytes/)
    expect(report.problems.find((p) => p.kind === 'write')).to.include({ shard: 7, key: last })
    // The note survives a restart until repair clears it.
    await store.close()
    const reopened = t.open()
    expect((await reopened.verify()).problems.map((p) => p.kind)).to.include('log')
    const repaired = await reopened.repair(7)
    expect(repaired.notes).to.have.length(1)
    expect((await reopened.verify()).problems).to.deep.equal([])
  })

  it('a damage note that was not written the first time is kept and written on the next open', async function () {
    this.timeout(scaled(20000))
    const dir = path.join(t.dir, 'store')
    await runNode(`
      const store = require('./')(process.argv[1], { shardCount: 1 })
      ;(async () => {
        for (let i = 0; i < 20; i++) await store.writeFile('f' + i, Buffer.alloc(20000, i))
        process.exit(0)
      })()`, [dir])
    const shard = path.join(dir, '000.s')
    const log = fs.readdirSync(shard).filter((f) => f.endsWith('.log')).map((f) => path.join(shard, f)).sort((a, b) => fs.statSync(b).size - fs.statSync(a).size)[0]
    const buf = fs.readFileSync(log)
    buf[Math.floor(buf.length / 2)] ^= 0xff
    fs.writeFileSync(log, buf)
    const realPut = LevelDb.prototype.put
    let failed = false
    LevelDb.prototype.put = function (key, value, options) {
      if (!failed && String(key).startsWith('!d!')) {
        failed = true
        return Promise.reject(Object.assign(new Error('injected'), { code: 'EIO' }))
      }
      return realPut.call(this, key, value, options)
    }
    const store = t.open()
    try {
      await rejects(store.exists('f1'), 'EIO') // the open that found the damage could not note it
    } finally {
      LevelDb.prototype.put = realPut
    }
    expect(failed).to.equal(true)
    expect((await store.verify()).problems.map((p) => p.kind)).to.include('log')
  })

  it('an unreadable damage note or accounting record is reported, and repair clears it', async () => {
    const store = t.open({ referenceId: REF })
    await store.writeFile(keyInShard(REF, 4, 'n'), 'x')
    await store.close()
    const shard = path.join(store.location, '004.s')
    await rawDb(shard, (db) => db.put('!d!2024-01-01T00:00:00.000Z.0', '{garbage'))
    const again = t.open()
    const report = await again.verify()
    expect(report.problems.map((p) => p.kind)).to.deep.equal(['log'])
    expect(report.problems[0].problem).to.contain('unreadable damage note')
    await again.close()
    await rawDb(shard, (db) => db.put('!a', 'not json'))
    const third = t.open()
    const err = await rejects(third.readFile(keyInShard(REF, 4, 'n')), 'ECORRUPT')
    expect(err.shard).to.equal(4)
    expect((await third.verify()).problems.map((p) => p.kind)).to.deep.equal(['shard'])
    const repaired = await third.repair(4)
    expect(repaired.files).to.equal(1)
    expect(repaired.notes[0].dropped[0]).to.contain('unreadable damage note')
    expect((await third.verify()).problems).to.deep.equal([])
  })

  it('an OS error while opening a shard keeps its code: EMFILE is not ECORRUPT', async () => {
    const store = t.open({ referenceId: REF })
    const key = keyInShard(REF, 6, 'e')
    await store.writeFile(key, 'x')
    await store.close()
    const realGet = LevelDb.prototype.get
    let failed = false
    LevelDb.prototype.get = function (k) {
      if (!failed && k === '!a' && this.shard === 6) {
        failed = true
        return Promise.reject(Object.assign(new Error('IO error: 000005.ldb: Too many open files'), { code: 'EMFILE' }))
      }
      return realGet.call(this, k)
    }
    // One shard open at most: with others open (opened or made ahead), an EMFILE waits
    // for one of them to close instead (lib/shard/pool.js).
    const again = t.open({ maxOpenShards: 1 })
    try {
      await rejects(again.readFile(key), 'EMFILE')
    } finally {
      LevelDb.prototype.get = realGet
    }
    expect((await again.readFile(key)).toString()).to.equal('x')
  })

  it('verify reports a shard it cannot open for an OS error (EMFILE, EIO, ENOSPC, EACCES) and checks the others', async () => {
    const { Shard } = require('../lib/shard/shard')
    const errors = require('../lib/api/errors')
    const store = t.open({ referenceId: REF, diskReserve: 0 })
    const failing = { 2: 'EMFILE', 3: 'EIO', 4: 'ENOSPC', 5: 'EACCES' }
    for (let shard = 1; shard <= 6; shard++) await store.writeFile(keyInShard(REF, shard, 'v'), `in ${shard}`)
    await store.close()
    const realOpen = Shard.open
    Shard.open = function (options) {
      const code = failing[options.index]
      if (code) return Promise.reject(errors.system(`shard ${options.index} could not be opened`, { code, message: `injected ${code}` }, { shard: options.index }))
      return realOpen.call(this, options)
    }
    try {
      const report = await t.open({ idleTimeout: 10, shardWaitTimeout: scaled(2000) }).verify()
      expect(report.files).to.equal(2)
      expect(report.problems.map((p) => [p.shard, p.kind])).to.deep.equal([[2, 'shard'], [3, 'shard'], [4, 'shard'], [5, 'shard']])
      for (const p of report.problems) expect(p.problem).to.contain(failing[p.shard])
    } finally {
      Shard.open = realOpen
    }
  })

  it('list() goes on past shards it cannot open, damaged or failing, and names exactly those at the end', async () => {
    const { Shard } = require('../lib/shard/shard')
    const errors = require('../lib/api/errors')
    const store = t.open({ referenceId: REF })
    const keys = [1, 2, 3, 4].map((shard) => keyInShard(REF, shard, 'l'))
    for (const key of keys) await store.writeFile(key, key)
    await store.close()
    // Shard 2 loses its manifest (damage); shard 3's files fail to read, and it fails
    // to open, with an OS error.
    for (const f of fs.readdirSync(shardDir(store, 2)).filter((f) => f.startsWith('MANIFEST'))) fs.rmSync(path.join(shardDir(store, 2), f))
    const realOpen = Shard.open
    Shard.open = function (options) {
      if (options.index === 3) return Promise.reject(errors.system('shard 003 could not be opened', { code: 'EIO', message: 'injected EIO' }, { shard: 3 }))
      return realOpen.call(this, options)
    }
    const { DbFiles } = require('../lib/leveldb/files')
    const realFiles = DbFiles.open
    DbFiles.open = function (dir, range) {
      if (dir === shardDir(store, 3)) return Promise.reject(Object.assign(new Error('injected EIO'), { code: 'EIO' }))
      return realFiles.call(this, dir, range)
    }
    try {
      const again = t.open()
      const listed = []
      const err = await rejects(async () => { for await (const e of again.list()) listed.push(e.key) }, 'EIO')
      expect(listed.sort()).to.deep.equal([keys[0], keys[3]].sort())
      expect(err.shards).to.deep.equal([2, 3])
      expect(err.errors.map((e) => e.code)).to.deep.equal(['ECORRUPT', 'EIO'])
      expect(err.message).to.match(/^shards 002, 003 could not be listed: .*injected EIO; the other shards were listed$/)
      // Only what was asked about: one shard, its own failure, no word of others.
      const one = await rejects(async () => { for await (const e of again.list(3)) listed.push(e.key) }, 'EIO')
      expect(one.shards).to.deep.equal([3])
      expect(one.message).to.equal('shard 003 could not be listed: injected EIO')
      const damaged = await rejects(async () => { for await (const e of again.list(2)) listed.push(e.key) }, 'ECORRUPT')
      expect(damaged.message).to.not.contain('other shards')
      expect(await collect(again.list(4))).to.deep.equal([{ key: keys[3], size: keys[3].length }])
      await rejects(again.compact(), 'EIO') // compact() goes on past them too, and names them
    } finally {
      Shard.open = realOpen
      DbFiles.open = realFiles
    }
  })

  it('an unreadable metadata record is ECORRUPT naming shard and key, and does not hide the rest of its shard', async () => {
    const store = t.open({ referenceId: REF })
    const keys = [0, 1, 2].map((i) => keyInShard(REF, 3, `m${i}`)).sort()
    for (const key of keys) await store.writeFile(key, key)
    await store.close()
    await rawDb(path.join(store.location, '003.s'), (db) => db.put('!m!' + keys[1], '{not json'))
    const again = t.open()
    const err = await rejects(again.stat(keys[1]), 'ECORRUPT')
    expect(err).to.include({ shard: 3, key: keys[1] })
    expect(err.message).to.contain('shard 003')
    const listed = []
    const listErr = await rejects(async () => { for await (const e of again.list()) listed.push(e.key) }, 'ECORRUPT')
    expect(listed).to.deep.equal([keys[0], keys[2]])
    expect(listErr.shards).to.deep.equal([3])
    const report = await again.verify()
    expect(report.problems.find((p) => p.kind === 'metadata')).to.include({ shard: 3, key: keys[1] })
  })

  it('a brief EMFILE right after a shard was created does not make it ECORRUPT', async () => {
    const store = t.open({ referenceId: REF, maxOpenShards: 1 }) // as above
    await store.open()
    const shard = shardDirName(shardFor(Buffer.from(REF, 'hex'), coerceKey('a').key))
    const realOpen = LevelDb.open
    let failed = false
    LevelDb.open = async function (location, options = {}) {
      if (!failed && path.basename(location) === shard) { // the shard's first open, once created
        failed = true
        throw Object.assign(new Error(`${location}/LOCK: Too many open files`), { reason: 'system', code: 'EMFILE' })
      }
      return realOpen.call(this, location, options)
    }
    try {
      await rejects(store.writeFile('a', 'x'), 'EMFILE')
    } finally {
      LevelDb.open = realOpen
    }
    expect(failed).to.equal(true)
    await store.writeFile('a', 'x')
    expect((await store.readFile('a')).toString()).to.equal('x')
  })

  describe('every error a user can meet has a documented code', () => {
    it('the digest thread dying mid-put does not fail put(buffer): the bytes are hashed inline', async () => {
      const store = t.open()
      const data = bytes(20 * 1024 * 1024 + 5, 'worker')
      let key
      expect(await killingDigestThread('update', 0, async () => (key = await store.put(data)))).to.be.above(0)
      expect(key).to.equal(sha256(data))
      expect((await store.readFile(key)).equals(data)).to.equal(true)
      expect(await store.put(data)).to.equal(key) // a new thread starts
    })

    it('readFile of a file larger than the largest Buffer is EFBIG, not a RangeError without a code', async () => {
      const store = t.open({ referenceId: REF })
      const key = keyInShard(REF, 1, 'huge')
      await store.writeFile(key, Buffer.alloc(128 * 1024 + 1)) // two chunks: a head without data
      await store.close()
      await rawDb(path.join(store.location, '001.s'), async (db) => {
        const { meta } = decodeHead(key, await db.get(key))
        await db.put(key, encodeHead(key, { ...meta, size: 2 ** 33, chunks: 2 ** 33 / (128 * 1024) }))
      })
      const err = await rejects(t.open().readFile(key), 'EFBIG')
      expect(err).to.be.instanceOf(RangeError)
      expect(err.message).to.contain('createReadStream')
    })

    it('a chunk writer used after it was aborted or committed fails with ECANCELED or EINVAL', async () => {
      const store = t.open({ referenceId: REF })
      await store.writeFile(keyInShard(REF, 2, 'w'), 'x') // the shard exists
      const { Shard } = require('../lib/shard/shard')
      const { ChunkKeys } = require('../lib/shard/records')
      await store.close()
      const shard = await Shard.open({ index: 2, location: path.join(store.location, '002.s'), cap: 1e9, chunkKeys: new ChunkKeys(1e9, C), sync: false })
      try {
        const aborted = new ChunkWriter({ lease: { shard, release: () => {}, mayWrite: () => {} }, key: 'a'.repeat(40), chunkSize: C })
        await aborted.abort()
        await rejects(aborted.write(Buffer.from('late')), 'ECANCELED')
        const committed = new ChunkWriter({ lease: { shard, release: () => {}, mayWrite: () => {} }, key: 'b'.repeat(40), chunkSize: C })
        await committed.write(Buffer.from('x'))
        await committed.finish()
        await rejects(committed.write(Buffer.from('late')), 'EINVAL')
      } finally {
        await shard.close()
      }
    })
  })
})

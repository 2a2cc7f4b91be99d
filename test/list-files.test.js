'use strict'

const { expect } = require('chai')
const fs = require('node:fs')
const path = require('node:path')
const crypto = require('node:crypto')
const leveldown = require('leveldown')
const { DbFiles } = require('../lib/leveldb/files')
const { manifestEdits } = require('../lib/leveldb/manifest')
const { createShard, makeTemplate } = require('../lib/shard/create')
const { useTmp, rejects, keyInShard, scaled, REF, runNode } = require('./helpers')

const promised = (fn) => new Promise((resolve, reject) => fn((err, value) => (err ? reject(err) : resolve(value))))
const shardDir = (store, shard) => path.join(store.location, `${String(shard).padStart(3, '0')}.s`)

// Every entry LevelDB itself reads in `range`, as 'key=value' (the database closed).
async function levelRead (dir, range = {}) {
  const db = leveldown(dir)
  await promised((cb) => db.open({ createIfMissing: false, compression: false }, cb)) // as kfs opens it
  try {
    const it = db.iterator({ ...range, keyAsBuffer: false, valueAsBuffer: false })
    const out = []
    for (;;) {
      const [key, value] = await new Promise((resolve, reject) => it.next((err, k, v) => (err ? reject(err) : resolve([k, v]))))
      if (key === undefined) break
      out.push(`${key}=${value}`)
    }
    await promised((cb) => it.end(cb))
    return out
  } finally {
    await promised((cb) => db.close(cb))
  }
}

// The same, read from the files a page of `limit` at a time, each page after the last
// key of the one before.
async function filesRead (dir, range = {}, limit = 100) {
  const files = await DbFiles.open(dir, range)
  const out = []
  for (let page = await files.read(range, limit); ; page = await files.read({ ...range, gt: page[page.length - 1].key, gte: undefined }, limit)) {
    out.push(...page.map((e) => `${e.key}=${e.value}`))
    if (page.length < limit) return out
  }
}

// A database with tables on several levels, keys overwritten and deleted in each, and
// the last writes in its log only (LevelDB's close writes no table).
async function grownDb (dir) {
  const db = leveldown(dir)
  await promised((cb) => db.open({ compression: false, writeBufferSize: 32 * 1024 }, cb))
  const keys = []
  const round = async (count, tag) => {
    for (let i = 0; i < count; i++) {
      const key = `!m!${crypto.randomBytes(6).toString('hex')}`
      keys.push(key)
      const ops = [{ type: 'put', key, value: `${tag} ${i} ${'x'.repeat(i % 200)}` }, { type: 'put', key: crypto.randomBytes(8).toString('hex'), value: crypto.randomBytes(300) }]
      if (i % 7 === 0) ops.push({ type: 'del', key: keys[(i * 31) % keys.length] })
      if (i % 5 === 0) ops.push({ type: 'put', key: keys[(i * 17) % keys.length], value: `${tag} over ${i}` })
      await promised((cb) => db.batch(ops, cb))
    }
  }
  await promised((cb) => db.put('!a', '{"used":0}', cb))
  await round(3000, 'deep')
  await promised((cb) => db.compactRange('!', '~', cb)) // down to level 1 or deeper
  await round(1500, 'middle')
  await round(60, 'logged') // 60 batches stay in the log
  await promised((cb) => db.close(cb))
  return dir
}

const levelsOf = (dir) => {
  const current = fs.readFileSync(path.join(dir, 'CURRENT'), 'latin1').trim()
  return new Set(manifestEdits(fs.readFileSync(path.join(dir, current))).flatMap((e) => e.tables.map((t) => t.level)))
}

// A copy of every file's name, size and mtime in the shard directories of `store`.
function shardFiles (location) {
  const seen = {}
  for (const dir of fs.readdirSync(location).filter((d) => d.endsWith('.s'))) {
    for (const name of fs.readdirSync(path.join(location, dir))) {
      const stat = fs.statSync(path.join(location, dir, name))
      seen[`${dir}/${name}`] = `${stat.size} ${stat.mtimeMs}`
    }
  }
  return seen
}

// Runs fn with the shards' files unread (each DbFiles.open rejects), so that list()
// opens every shard, as it did before it read files.
async function throughLevelDb (fn) {
  const real = DbFiles.open
  DbFiles.open = () => Promise.reject(Object.assign(new Error('files not read'), { reason: 'unreadable' }))
  try {
    return await fn()
  } finally {
    DbFiles.open = real
  }
}

// The directories DbFiles.open is asked to read while fn runs.
async function filesOpened (fn) {
  const real = DbFiles.open
  const dirs = []
  DbFiles.open = function (dir, range) {
    dirs.push(dir)
    return real.call(this, dir, range)
  }
  try {
    await fn()
  } finally {
    DbFiles.open = real
  }
  return dirs
}

async function listing (store, shard) {
  const entries = []
  try {
    for await (const entry of store.list(shard)) entries.push(entry)
  } catch (err) {
    return { entries, code: err.code, shards: err.shards, keys: err.errors.map((e) => e.key), message: err.message }
  }
  return { entries }
}

describe('reading a closed LevelDB from its files (lib/leveldb/files.js)', () => {
  const t = useTmp()

  it('reads what LevelDB reads: tables on several levels, the log, keys overwritten and deleted, a page at a time', async function () {
    this.timeout(scaled(60000))
    const dir = await grownDb(path.join(t.dir, 'db'))
    expect(levelsOf(dir).size, 'levels').to.be.above(1)
    expect(fs.readdirSync(dir).filter((f) => f.endsWith('.log')).some((f) => fs.statSync(path.join(dir, f)).size > 0), 'a log with writes').to.equal(true)
    for (const [range, limit] of [[{}, 1000], [{ gte: '!a', lt: '!m!\xff' }, 100], [{ gt: '!m!4', lte: '!m!b' }, 7], [{ gte: '!a', lte: '!a' }, 1], [{ gt: '!m!\xff', lt: '!n' }, 10]]) {
      const files = await filesRead(dir, range, limit)
      expect(files, JSON.stringify(range)).to.deep.equal(await levelRead(dir, range))
      if (limit > 1 && range.gt !== '!m!\xff') expect(files.length, JSON.stringify(range)).to.be.above(limit)
    }
  })

  it('reads an empty database, and a shard just made from the template, as LevelDB does', async () => {
    const empty = path.join(t.dir, 'empty')
    const db = leveldown(empty)
    await promised((cb) => db.open(cb))
    await promised((cb) => db.close(cb))
    const emptyRead = await filesRead(empty)
    expect(emptyRead).to.deep.equal([])
    expect(emptyRead).to.deep.equal(await levelRead(empty))

    const tmp = path.join(t.dir, 'tmp')
    fs.mkdirSync(tmp)
    const shard = path.join(t.dir, '000.s')
    await createShard(shard, tmp, await makeTemplate(tmp))
    const made = await filesRead(shard)
    expect(made.map((e) => e.split('=')[0])).to.include('!a')
    expect(made).to.deep.equal(await levelRead(shard))
  })

  it('rejects, as unreadable, a block or log record that does not match its checksum, a compressed block, and a database a process holds', async function () {
    this.timeout(scaled(30000))
    const dir = await grownDb(path.join(t.dir, 'db'))
    const tables = fs.readdirSync(dir).filter((f) => f.endsWith('.ldb'))
    const table = tables.find((f) => fs.readFileSync(path.join(dir, f)).includes('deep '))
    const original = fs.readFileSync(path.join(dir, table))
    const flip = (file, at) => {
      const buf = fs.readFileSync(file)
      buf[at] ^= 0x01
      fs.writeFileSync(file, buf)
    }
    flip(path.join(dir, table), original.indexOf('deep ') + 2) // inside a value of a data block
    await rejects(filesRead(dir, { gte: '!a', lt: '!m!\xff' }).catch((err) => { throw Object.assign(err, { code: err.reason }) }), 'unreadable')
    fs.writeFileSync(path.join(dir, table), original)

    // A table whose index handle says its index runs to a terabyte: nothing that size is read.
    const footer = Buffer.alloc(40)
    Buffer.from([0, 0, 0, 0x80, 0x80, 0x80, 0x80, 0x80, 0x20]).copy(footer) // metaindex 0 + 0, index at 0 of 2^40 bytes
    const lying = fs.readFileSync(path.join(dir, table))
    footer.copy(lying, lying.length - 48)
    fs.writeFileSync(path.join(dir, table), lying)
    const lie = await filesRead(dir, { gte: '!a', lt: '!m!\xff' }).catch((err) => err)
    expect(lie.reason, lie.stack).to.equal('unreadable')
    expect(lie.message).to.contain('past the file\'s end')
    fs.writeFileSync(path.join(dir, table), original)
    expect(await filesRead(dir, { gte: '!a', lt: '!m!\xff' })).to.deep.equal(await levelRead(dir, { gte: '!a', lt: '!m!\xff' }))

    // The log LevelDB's open just wrote is empty: one with records, from a database not closed.
    const logged = path.join(t.dir, 'logged')
    await runNode(`
      const db = require('leveldown')(process.argv[1])
      db.open((err) => { if (err) throw err; db.put('!m!k', 'v', (err) => { if (err) throw err; process.exit(0) }) })`, [logged])
    const log = fs.readdirSync(logged).find((f) => f.endsWith('.log'))
    expect(await filesRead(logged)).to.deep.equal(['!m!k=v'])
    flip(path.join(logged, log), 20)
    await rejects(filesRead(logged).catch((err) => { throw Object.assign(err, { code: err.reason }) }), 'unreadable')

    // A table missing, even one of keys out of the range read: LevelDB's open fails.
    const tableLost = path.join(t.dir, 'table-lost')
    const lost = leveldown(tableLost)
    await promised((cb) => lost.open({ compression: false }, cb))
    await promised((cb) => lost.put('!m!k', 'v', cb))
    await promised((cb) => lost.compactRange('!', '~', cb))
    await promised((cb) => lost.put('ff', 'chunk', cb))
    await promised((cb) => lost.compactRange('0', '~', cb))
    await promised((cb) => lost.close(cb))
    const current = fs.readFileSync(path.join(tableLost, 'CURRENT'), 'latin1').trim()
    const live = manifestEdits(fs.readFileSync(path.join(tableLost, current))).flatMap((e) => e.tables)
    const chunks = live.find((table) => table.smallest.toString().startsWith('ff'))
    const range = { gte: '!a', lt: '!m!\xff' }
    expect(await filesRead(tableLost, range)).to.deep.equal(['!m!k=v'])
    fs.rmSync(path.join(tableLost, `${String(chunks.number).padStart(6, '0')}.ldb`))
    await rejects(filesRead(tableLost, range).catch((err) => { throw Object.assign(err, { code: err.reason }) }), 'unreadable')

    // kfs writes no compressed block: one is not read.
    const snappy = path.join(t.dir, 'snappy')
    const db = leveldown(snappy)
    await promised((cb) => db.open({ compression: true }, cb))
    await promised((cb) => db.put('!m!k', 'v'.repeat(1000), cb))
    await promised((cb) => db.compactRange('!', '~', cb))
    await rejects(filesRead(snappy).catch((err) => { throw Object.assign(err, { code: err.reason }) }), 'unreadable') // held
    await promised((cb) => db.close(cb))
    await rejects(filesRead(snappy).catch((err) => { throw Object.assign(err, { code: err.reason }) }), 'unreadable') // compressed
  })
})

describe('list() of shards nobody has open', () => {
  const t = useTmp()
  // Shards open only when used: a store opens its shards in the background otherwise.
  const CLOSED = { openAhead: false }

  // A store with files in several shards, some overwritten, some removed, some named,
  // and one shard of more than a page (1,000 records).
  async function filledStore (options = {}) {
    const store = t.open({ referenceId: REF, ...options })
    const keys = Array.from({ length: 40 }, (_, i) => (i % 3 ? crypto.createHash('sha1').update(`k${i}`).digest('hex') : `file ${i}`))
    for (const [i, key] of keys.entries()) await store.writeFile(key, Buffer.alloc(i * 100, i))
    for (const key of keys.slice(0, 10)) await store.writeFile(key, Buffer.alloc(7))
    for (const key of keys.slice(30)) await store.unlink(key)
    const busy = Array.from({ length: 1100 }, (_, i) => keyInShard(REF, 9, `busy ${i}`))
    for (let i = 0; i < busy.length; i += 50) await Promise.all(busy.slice(i, i + 50).map((key) => store.writeFile(key, key)))
    await store.close()
    return store
  }

  it('lists exactly what opening every shard lists, reading files only, and nothing in a shard changes', async function () {
    this.timeout(scaled(60000))
    const store = await filledStore()
    const before = shardFiles(store.location)
    const shards = fs.readdirSync(store.location).filter((d) => d.endsWith('.s')).length
    let listed
    const read = await filesOpened(async () => { listed = await listing(t.open(CLOSED, 'store')) })
    expect(shardFiles(store.location)).to.deep.equal(before)
    expect(listed.entries).to.have.length(1100 + 30)
    expect(read).to.have.length(shards) // each once, however many pages
    const nine = await listing(t.open(CLOSED, 'store'), 9)
    expect(nine.entries).to.have.length(1100)
    expect(shardFiles(store.location)).to.deep.equal(before)
    expect(nine).to.deep.equal(await throughLevelDb(() => listing(t.open({}, 'store'), 9)))
    expect(listed).to.deep.equal(await throughLevelDb(() => listing(t.open({}, 'store'))))
    expect(shardFiles(store.location)).to.not.deep.equal(before) // opening a shard writes
  })

  it('lists a shard the store has open through LevelDB, and shards left with logs by a crash from their files', async function () {
    this.timeout(scaled(30000))
    const dir = path.join(t.dir, 'store')
    const first = keyInShard(REF, 7, 'a')
    const second = keyInShard(REF, 8, 'b')
    await runNode(`
      const store = require('./')(process.argv[1], { referenceId: '${REF}', openAhead: false })
      store.writeFile(process.argv[2], 'one').then(() => store.writeFile(process.argv[3], 'two')).then(() => process.exit(0))`, [dir, first, second])
    const copy = path.join(t.dir, 'copy')
    fs.cpSync(dir, copy, { recursive: true, filter: (file) => !file.endsWith('.sock') })
    const store = t.open({ ...CLOSED, idleTimeout: scaled(60000) })
    await store.writeFile(keyInShard(REF, 7, 'c'), 'three') // shard 7 open from here on
    let listed
    const read = await filesOpened(async () => { listed = await listing(store) })
    expect(read).to.deep.equal([shardDir(store, 8)])
    expect(listed.entries.map((e) => e.key).sort()).to.deep.equal([first, second, keyInShard(REF, 7, 'c')].sort())
    // The copy, as opening every shard lists it.
    const opened = await throughLevelDb(() => listing(t.open({ idleTimeout: scaled(60000) }, 'copy')))
    expect(opened.entries.map((e) => e.key).sort()).to.deep.equal([first, second].sort())
  })

  it('a damaged table block or log record is read through LevelDB, which names the damage as it did', async function () {
    this.timeout(scaled(60000))
    const dir = path.join(t.dir, 'store')
    const key = keyInShard(REF, 5, 'a')
    const logged = keyInShard(REF, 6, 'b')
    let store = t.open({ referenceId: REF })
    await store.writeFile(keyInShard(REF, 4, 'd'), 'healthy')
    await store.writeFile(key, 'content')
    await store.writeFile(keyInShard(REF, 5, 'c'), 'more')
    await store.close()
    // The size in shard 5's metadata record of `key` becomes a letter: a record that does
    // not decode, and a block whose checksum no longer matches.
    const table = fs.readdirSync(shardDir(store, 5)).map((f) => path.join(shardDir(store, 5), f)).find((f) => f.endsWith('.ldb') && fs.readFileSync(f).includes(key))
    const buf = fs.readFileSync(table)
    const at = buf.indexOf('"size":', buf.indexOf(key)) + 7 // its metadata record comes first ('!m!' sorts before hex)
    buf[at] = 'x'.charCodeAt(0)
    fs.writeFileSync(table, buf)
    // Shard 6's log, left by a process that did not close the store, loses a record.
    await runNode(`
      const store = require('./')(process.argv[1], { referenceId: '${REF}', openAhead: false })
      store.writeFile(process.argv[2], 'logged').then(() => process.exit(0))`, [dir, logged])
    const log = fs.readdirSync(shardDir(store, 6)).filter((f) => f.endsWith('.log')).map((f) => path.join(shardDir(store, 6), f)).find((f) => fs.statSync(f).size > 0)
    const logBuf = fs.readFileSync(log)
    logBuf[logBuf.length - 10] ^= 0xff
    fs.writeFileSync(log, logBuf)
    const copy = path.join(t.dir, 'copy')
    fs.cpSync(dir, copy, { recursive: true, filter: (file) => !file.endsWith('.sock') })

    store = t.open(CLOSED)
    const { Shard } = require('../lib/shard/shard')
    const realOpen = Shard.open
    const opened = []
    Shard.open = function (options) {
      opened.push(options.index)
      return realOpen.call(this, options)
    }
    let listed
    try {
      listed = await listing(store)
    } finally {
      Shard.open = realOpen
    }
    expect(opened.sort()).to.deep.equal([5, 6]) // the reader gave up on those two only
    expect(listed.code).to.equal('ECORRUPT')
    expect(listed.shards).to.deep.equal([5])
    expect(listed.keys).to.deep.equal([key])
    expect(listed.entries.map((e) => e.key)).to.deep.equal([keyInShard(REF, 4, 'd'), keyInShard(REF, 5, 'c')])
    expect(listed).to.deep.equal(await throughLevelDb(() => listing(t.open({}, 'copy'))))
    expect((await store.verify()).problems.map((p) => [p.shard, p.kind])).to.deep.include([6, 'log'])
  })
})

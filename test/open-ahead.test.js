'use strict'

const fs = require('node:fs')
const path = require('node:path')
const { spawnSync } = require('node:child_process')
const { Readable, Writable } = require('node:stream')
const { expect } = require('chai')
const { useTmp, keysForShards, bytes, openShardLocks, rejects, scaled, sleep, REF } = require('./helpers')
const { ShardPool } = require('../lib/shard/pool')
const { Memtables, MIN_FLUSH } = require('../lib/shard/memtables')
const { LevelDb } = require('../lib/leveldb/leveldb')
const { shardDirName } = require('../lib/base/shard-names')
const { main } = require('../lib/cli/program')
const records = require('../lib/shard/records')

const ROOT = path.resolve(__dirname, '..')

// Resolves once check() is true; fails after `ms` (scaled) saying what it waited for.
async function until (check, what, ms = 10000) {
  const deadline = Date.now() + scaled(ms)
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`waited ${scaled(ms)} ms for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

// The shards of the store at `location` this process holds open (LevelDB keeps each
// open database's LOCK file open), by index.
function heldShards (location) {
  const held = new Set()
  for (const fd of fs.readdirSync('/proc/self/fd')) {
    try {
      const target = fs.readlinkSync(path.join('/proc/self/fd', fd))
      const match = target.startsWith(location) && /(\d{3})\.s\/LOCK$/.exec(target)
      if (match) held.add(Number(match[1]))
    } catch {
      // the descriptor closed while we looked
    }
  }
  return held
}

function heldAll (location, shards) {
  const held = heldShards(location)
  return shards.every((shard) => held.has(shard))
}

describe('a store opens its shards ahead of need', function () {
  this.timeout(scaled(120000))
  const t = useTmp()

  // A store holding one file in each of `count` shards, closed: [{ shard, key }].
  async function storeWith (count) {
    const keys = keysForShards(REF, count)
    const store = t.open({ referenceId: REF })
    await Promise.all(keys.map(({ key }) => store.writeFile(key, bytes(1000, key))))
    await store.close()
    return keys
  }

  it('opens every shard in the background once open() resolved, with no call made', async () => {
    const keys = await storeWith(12)
    const store = t.open()
    await store.open()
    await until(() => heldAll(store.location, keys.map((k) => k.shard)), 'the 12 shards to open')
  })

  it('serves the calls made while it opens, each shard opened once', async () => {
    const keys = await storeWith(40)
    const store = t.open()
    await store.open()
    const read = await Promise.all(keys.map(({ key }) => store.readFile(key)))
    keys.forEach(({ key }, i) => expect(read[i].equals(bytes(1000, key))).to.equal(true))
    await until(() => heldAll(store.location, keys.map((k) => k.shard)), 'the 40 shards to open')
    await store.writeFile(keys[0].key, 'again')
    expect((await store.readFile(keys[0].key)).toString()).to.equal('again')
  })

  it('stops at close(): the close ends at once, nothing left open, and the store opens again', async () => {
    const keys = await storeWith(64)
    const store = t.open()
    await store.open()
    const started = Date.now()
    await store.close()
    expect(Date.now() - started).to.be.below(scaled(2000))
    await sleep(100) // an open begun after close() would hold its lock now
    expect(openShardLocks(store.location)).to.equal(0)
    const again = t.open()
    expect((await again.readFile(keys[63].key)).equals(bytes(1000, keys[63].key))).to.equal(true)
  })

  it('a shard that fails to open leaves the others opening and working, and its next call reports the failure', async () => {
    const keys = await storeWith(8)
    const broken = keys[3]
    fs.rmSync(path.join(t.dir, 'store', shardDirName(broken.shard)), { recursive: true })
    const store = t.open()
    await store.open()
    await until(() => heldAll(store.location, keys.filter((k) => k !== broken).map((k) => k.shard)), 'the 7 other shards to open')
    const err = await rejects(store.readFile(broken.key), 'ECORRUPT')
    expect(fs.existsSync(path.join(t.dir, 'store', shardDirName(broken.shard))), 'a shard lost is not made anew').to.equal(false)
    expect(err.shard).to.equal(broken.shard)
    await rejects(store.readFile(broken.key), 'ECORRUPT') // every time, not only once
    for (const { key } of keys.filter((k) => k !== broken)) expect((await store.readFile(key)).equals(bytes(1000, key))).to.equal(true)
  })

  it('never keeps the process alive: one that opened a store and does nothing else exits once the opens in flight end', async () => {
    await storeWith(64)
    // Counts the shard locks the process holds as it exits: each open begun holds one.
    const script = `
      const fs = require('node:fs')
      const path = require('node:path')
      const kfs = require('./')
      const dir = process.argv[1]
      const locks = () => fs.readdirSync('/proc/self/fd').filter((fd) => {
        try { return /\\d{3}\\.s\\/LOCK$/.test(fs.readlinkSync(path.join('/proc/self/fd', fd))) } catch { return false }
      }).length
      process.on('exit', () => process.stdout.write(String(locks())))
      kfs(dir).open()`
    const child = spawnSync(process.execPath, ['-e', script, path.join(t.dir, 'store')], { cwd: ROOT, encoding: 'utf8', timeout: scaled(30000) })
    expect(child.stderr).to.equal('')
    expect(child.status).to.equal(0)
    expect(Number(child.stdout)).to.be.below(64)
  })

  it('opens none with openAhead false: each shard on its first use', async () => {
    const keys = await storeWith(12)
    const store = t.open({ openAhead: false })
    await store.open()
    await sleep(300)
    expect(openShardLocks(store.location)).to.equal(0)
    await store.readFile(keys[5].key)
    await sleep(100)
    expect(openShardLocks(store.location)).to.equal(1)
  })

  it('the command line opens only the shards its command uses', async () => {
    const keys = await storeWith(64)
    const dir = path.join(t.dir, 'store')
    // Counts the shard locks as the command prints its answer, its store still open,
    // once more than one is open, or after a while that would let many open ahead.
    let seen
    const stdout = new Writable({
      write (chunk, encoding, callback) {
        const deadline = Date.now() + scaled(1000)
        const look = () => {
          seen = openShardLocks(dir)
          if (seen > 1 || Date.now() > deadline) callback()
          else setTimeout(look, 10)
        }
        look()
      }
    })
    const stderr = new Writable({ write (chunk, encoding, callback) { callback() } })
    const code = await main(['node', 'kfs', 'exists', keys[7].key], { stdin: Readable.from([]), stdout, stderr, temps: new Set() }, { KFS_DB: dir })
    expect(code).to.equal(0)
    expect(seen).to.equal(1)
  })

  it('opens none for a store opened read-only', async () => {
    await storeWith(4)
    const store = t.open({ readOnly: true })
    await store.open()
    await sleep(300)
    // A shard opened read-only is a LevelDB in a shadow under the temporary directory.
    const shadowLocks = () => fs.readdirSync('/proc/self/fd').filter((fd) => {
      try {
        return /kfs-readonly-[^/]*\/\d{3}\.s\/LOCK$/.test(fs.readlinkSync(path.join('/proc/self/fd', fd)))
      } catch {
        return false // closed while we looked
      }
    }).length
    expect(shadowLocks()).to.equal(0)
    const [{ key }] = keysForShards(REF, 1)
    await store.readFile(key)
    expect(shadowLocks()).to.equal(1) // what the count sees, once one is open
  })
})

describe('a store makes the shards it has not made yet ahead of need', function () {
  this.timeout(scaled(120000))
  const t = useTmp()
  const ALL = Array.from({ length: 256 }, (_, i) => i)
  const shardDirs = (location) => fs.readdirSync(location).filter((name) => /^\d{3}\.s$/.test(name))

  it('a new store makes and opens all its shards in the background once open() resolved, with no call made', async () => {
    const store = t.open()
    await store.open()
    await until(() => heldAll(store.location, ALL), 'the 256 shards to be made and opened', 60000)
    expect(shardDirs(store.location)).to.have.length(256)
    expect((await store.usage()).shards).to.have.length(256) // each known, with its figures
  })

  it('only the shards of its shardCount, and those of a store reopened with some made', async () => {
    const first = t.open({ shardCount: 16 })
    await first.open()
    await first.close() // stops making: some or none made
    const store = t.open()
    await store.open()
    await until(() => shardDirs(store.location).length === 16 && heldAll(store.location, ALL.slice(0, 16)), 'the 16 shards')
    await sleep(100)
    expect(shardDirs(store.location)).to.have.length(16)
  })

  it('serves the writes made meanwhile, each shard made once', async () => {
    const keys = keysForShards(REF, 64)
    const store = t.open({ referenceId: REF })
    await store.open()
    await Promise.all(keys.map(({ key }) => store.writeFile(key, bytes(3000, key))))
    for (const { key } of keys) expect((await store.readFile(key)).equals(bytes(3000, key))).to.equal(true)
    await until(() => heldAll(store.location, ALL), 'the 256 shards', 60000)
    const usage = await store.usage()
    expect(usage.files).to.equal(64)
    expect(usage.shards).to.have.length(256)
  })

  it('stops at close(): the close ends at once, no shard is left half-made, and nothing is left in tmp', async () => {
    for (const wait of ['no wait', 'the first made']) {
      const store = t.open(undefined, `store-${wait.length}`)
      await store.open()
      if (wait === 'the first made') await until(() => shardDirs(store.location).length > 0, 'a shard to be made')
      const started = Date.now()
      await store.close()
      expect(Date.now() - started, `close after ${wait}`).to.be.below(scaled(2000))
      const made = shardDirs(store.location)
      expect(made.length, `made, ${wait}`).to.be.below(256)
      expect(fs.readdirSync(path.join(store.location, 'tmp')), `tmp, ${wait}`).to.deep.equal([])
      await sleep(100) // nothing made after close()
      expect(shardDirs(store.location)).to.deep.equal(made)
      // Every shard made is whole: it opens with its accounting.
      for (const name of made) {
        const db = await LevelDb.open(path.join(store.location, name))
        try {
          expect(JSON.parse(await db.get(records.ACCOUNT))).to.deep.include({ used: 0, files: 0 })
        } finally {
          await db.close()
        }
      }
    }
  })

  it('a shard that fails to be made (a full disk) leaves the others made, and its next write reports the failure', async () => {
    const [broken, other] = keysForShards(REF, 2)
    const fsp = require('node:fs/promises')
    const rename = fsp.rename
    const full = () => Object.assign(new Error('full'), { code: 'ENOSPC', syscall: 'rename' })
    let failing = true
    fsp.rename = function (from, to) {
      if (failing && path.basename(to) === shardDirName(broken.shard)) return Promise.reject(full())
      return rename.apply(this, arguments)
    }
    try {
      const store = t.open({ referenceId: REF })
      await store.open()
      const others = ALL.filter((shard) => shard !== broken.shard)
      await until(() => heldAll(store.location, others), 'the 255 other shards', 60000)
      expect(fs.existsSync(path.join(store.location, shardDirName(broken.shard)))).to.equal(false)
      await rejects(store.writeFile(broken.key, 'x'), 'ENOSPC')
      await store.writeFile(other.key, 'y')
      failing = false // room again: the next write makes it
      await store.writeFile(broken.key, 'x')
      expect((await store.readFile(broken.key)).toString()).to.equal('x')
      expect(fs.readdirSync(path.join(store.location, 'tmp')).filter((name) => !name.startsWith('spare-'))).to.deep.equal([])
    } finally {
      fsp.rename = rename
    }
  })

  it('never keeps the process alive: one that opened a new store and does nothing else exits before all are made', async () => {
    const dir = path.join(t.dir, 'new')
    // Waits (a timer that keeps it alive) until the first shard is made, then does nothing.
    const script = `
      const fs = require('node:fs')
      const dir = process.argv[1]
      require('./')(dir).open().then(function poll () {
        if (!fs.readdirSync(dir).some((name) => /^\\d{3}\\.s$/.test(name))) setTimeout(poll, 5)
      })`
    const child = spawnSync(process.execPath, ['-e', script, dir], { cwd: ROOT, encoding: 'utf8', timeout: scaled(30000) })
    expect(child.stderr).to.equal('')
    expect(child.status).to.equal(0)
    expect(shardDirs(dir).length).to.be.within(1, 255)
  })
})

describe('idle shards', function () {
  this.timeout(scaled(30000))
  const t = useTmp()

  it('stay open without idleTimeout (the default): no timer closes them', async () => {
    const closed = []
    const pool = new ShardPool({
      maxOpen: 4,
      waitTimeout: 1000,
      open: async (index) => ({ index, db: {} }),
      close: async (shard) => { closed.push(shard.index) }
    })
    const shard = await pool.acquire(1, {})
    pool.release(shard)
    await sleep(100)
    expect(closed).to.deep.equal([])
    expect(pool.peek(1)).to.equal(shard)
    await pool.closeAll()
  })

  it('opened ahead, close after idleTimeout when it is set', async () => {
    const closed = []
    const pool = new ShardPool({
      maxOpen: 4,
      idleTimeout: 20,
      waitTimeout: 1000,
      open: async (index) => ({ index, db: {} }),
      close: async (shard) => { closed.push(shard.index) }
    })
    expect(await pool.openAhead(2, {})).to.equal(true)
    await until(() => closed.length === 1, 'the idle shard to close', 2000)
    expect(closed).to.deep.equal([2])
  })

  it('are flushed once the store went quiet, fullest first, one at a time, and not while it is written', async () => {
    const flushed = []
    const shard = (name, bytes) => {
      const s = { name, bytes, db: { memoryUsage: () => s.bytes, flush: async () => { flushed.push(name); s.bytes = 0 } } }
      return s
    }
    const memtables = new Memtables({ limit: 1024 * 1024 * 1024, quietMs: scaled(200) })
    const [a, b, c] = [shard('a', 2 * MIN_FLUSH), shard('b', 4 * MIN_FLUSH), shard('c', MIN_FLUSH / 2)]
    for (const s of [a, b, c]) memtables.add(s)
    for (let i = 0; i < 3; i++) { // written every 50 ms: never quiet
      memtables.begin(a)
      memtables.wrote(a)
      await sleep(50)
    }
    expect(flushed).to.deep.equal([])
    await until(() => flushed.length === 2, 'the two shards worth a flush to flush', 5000)
    expect(flushed).to.deep.equal(['b', 'a']) // c holds less than MIN_FLUSH
    expect(memtables.quietFlushes).to.equal(2)
    expect(memtables.flushes).to.equal(0) // none for the budget
    memtables.stop()
  })

  it('a quiet flush that frees nothing (a full disk) is not tried again before a write to the shard succeeds: no spin', async () => {
    let flushes = 0
    const full = { bytes: 4 * MIN_FLUSH }
    // LevelDB keeps its failed write: the flush ends, the memtable as full.
    full.db = { memoryUsage: () => full.bytes, flush: () => sleep(1).then(() => { flushes++ }) }
    const memtables = new Memtables({ limit: 1024 * 1024 * 1024, quietMs: scaled(50) })
    memtables.add(full)
    memtables.begin(full)
    memtables.wrote(full, false)
    await sleep(scaled(500))
    expect(flushes).to.equal(1)
    memtables.begin(full)
    memtables.wrote(full, true) // written again: worth a flush once the store is quiet
    await until(() => flushes === 2, 'the flush after the write', 2000)
    await sleep(scaled(300))
    expect(flushes).to.equal(2)
    memtables.stop()
  })

  it('in a store left quiet, a shard written has its memtable in a table before the store closes', async () => {
    const [{ key, shard }] = keysForShards(REF, 1)
    const store = t.open({ referenceId: REF })
    await store.writeFile(key, bytes(200 * 1024, key))
    const dir = path.join(store.location, shardDirName(shard))
    const tables = () => fs.readdirSync(dir).filter((name) => name.endsWith('.ldb')).length
    const before = tables() // a new shard's template may hold one
    await until(() => tables() === before + 1, 'the memtable to be written out')
  })

  it('a LevelDB flushed with no write since has nothing for its close to flush', async () => {
    const db = await LevelDb.open(path.join(t.dir, 'db'), { createIfMissing: true })
    try {
      await db.put('a', 'x')
      expect(db.written).to.equal(true)
      await db.flush()
      expect(db.written).to.equal(false)
      const during = db.flush()
      await db.put('b', 'y') // may land after the switch: still to flush
      await during
      expect(db.written).to.equal(true)
    } finally {
      await db.close()
    }
  })
})

'use strict'

// With iterator.js, the only code that touches the LevelDB binding, so that it can be
// swapped. Every error the binding reports leaves lib/leveldb/ through classify.js.
const fs = require('node:fs/promises')
const path = require('node:path')
const leveldown = require('leveldown')
const { guardedOpen, settleForRepair } = require('./log-guard')
const { recoverCut } = require('./power-cut')
const { makeShadow, blockCompactions, isShadowed } = require('./read-only')
const { Iterator } = require('./iterator')
const { classify, classifyOpenError } = require('./classify')
const { shardName } = require('../base/shard-names')
const errors = require('../api/errors')
const { Lifecycle } = require('../api/lifecycle')
const { syncDir } = require('../base/sync-dir')

// A full disk or quota.
const FULL = new Set(['ENOSPC', 'EDQUOT'])

// A directory sync that failed for want of descriptors is tried again, this many times
// in all.
const RETRIED = new Set(['EMFILE', 'ENFILE'])
const DIR_SYNC_ATTEMPTS = 4

// The databases this process has open for writing, by real path. A second open of one
// must never reach LevelDB: its lock is fcntl's, which is per process, and LevelDB 1.20
// closes the descriptor of a lock it finds held by this process, which drops the
// process's lock (POSIX) while the first open goes on, so that another process could
// then open the database too.
const HELD = new Set()

// What every database's `supports` is: the first one's. Each leveldown instance makes
// its manifest of features (abstract-leveldown), the same for all and read by neither
// package nor kfs, as an object of its own: 1.6 KB of the JavaScript heap, 400 KB for
// 256 shards. The heap's size decides how often V8 collects it whole while reads hand
// out Buffers (doc/performance.md, "Format 3: a piece is one get").
const MANIFEST = { supports: undefined }

// Marks the failure of a synced write that was applied, but whose directory could not
// be synced after it (LevelDb#write): see madeNotDurable().
const NOT_DURABLE = Symbol('kfs.notDurable')

// A memtable's size: LevelDB's default, as larger ones bought no measurable write speed
// and smaller ones cost a writer speed (doc/performance.md). What all shards' memtables
// hold together is the store's memory budget's business (shard/memtables.js).
const WRITE_BUFFER = 4 * 1024 * 1024

// Tuned for 128 KiB values (perf/probes/throughput.js): no compression (stored files are
// mostly compressed or encrypted already); table files large enough that a full 32 GiB
// shard is not tens of thousands of files. The block cache stays empty: every read
// passes fillCache: false, and LevelDB never caches the blocks of a table it maps.
const DEFAULTS = {
  compression: false,
  writeBufferSize: WRITE_BUFFER,
  maxFileSize: 32 * 1024 * 1024,
  cacheSize: 4 * 1024 * 1024,
  maxOpenFiles: 64
}

class LevelDb {
  #db
  #life = new Lifecycle('open') // the binding crashes on a call after close: every call checks it
  #iterators = new Set()
  #dir // where LevelDB has it open: `location`, or its shadow
  #shadow
  #writesBegun = 0
  #writesEnded = 0
  #writeBuffer
  #held // its key in HELD
  #compactions = 0 // compactRange() calls in flight
  #compactionsBegun = 0
  #replayed

  // shard: the shard index this database is, named by the errors it raises.
  // replayed: LevelDB had a log with records to replay when it opened it.
  constructor (db, location, shard, shadow, writeBuffer, replayed = true) {
    this.#db = db
    this.#replayed = replayed
    this.location = location
    this.shard = shard
    this.#shadow = shadow
    this.#writeBuffer = writeBuffer
    this.#dir = shadow ? shadow.dir : location
    this.readOnly = Boolean(shadow) // every write is refused with EROFS
    this.failed = undefined // a write failed for a reason LevelDB keeps until reopened
    this.written = false // anything written since it was opened, or last flushed
  }

  // Resolves to a LevelDb or rejects with a classified error carrying a `reason`:
  // 'missing', 'locked', 'system' (an OS error, with its code) or 'damaged'.
  // readOnly: opened through a shadow (read-only.js), which close() removes; nothing is
  // written at `location`, and it is never created. Its failures carry `readOnly`.
  static async open (location, { readOnly = false, ...options } = {}) {
    if (!readOnly) {
      if (isShadowed(location)) throw Object.assign(new Error(`${location}: open read-only in this process`), { reason: 'locked' })
      const held = await fs.realpath(location).catch(() => path.resolve(location))
      if (HELD.has(held)) throw Object.assign(new Error(`${location}/LOCK: already held by this process`), { reason: 'locked' })
      HELD.add(held)
      try {
        const db = await LevelDb.#open(location, location, options)
        db.#held = held
        return db
      } catch (err) {
        HELD.delete(held)
        throw err
      }
    }
    let shadow, db
    try {
      shadow = await makeShadow(location)
      db = await LevelDb.#open(location, shadow.dir, { ...options, createIfMissing: false, errorIfExists: false }, shadow)
      await blockCompactions(shadow.dir)
      return db
    } catch (err) {
      if (db) await db.close().catch(() => {}) // and removes the shadow
      else if (shadow) await shadow.remove().catch(() => {})
      // Only the shadow is written: a full disk is the temporary directory's.
      if (shadow && FULL.has(err.code)) err.message += ` (the temporary directory ${shadow.tmp}, where a database opened read-only is shadowed, is full)`
      throw Object.assign(err, { readOnly: true })
    }
  }

  // Opens the database at `dir`, which is `location` or its shadow.
  static async #open (location, dir, { createIfMissing = false, errorIfExists = false, shard, ...options }, shadow) {
    const tuning = Object.fromEntries(Object.entries(options).filter(([, value]) => value !== undefined))
    // LevelDB creates the directory, LOCK and LOG before it finds no database there:
    // without createIfMissing, leave a place holding no database untouched.
    if (!createIfMissing) {
      try {
        await fs.access(path.join(dir, 'CURRENT'))
      } catch (err) {
        throw Object.assign(new Error(`${location}: no LevelDB database here (${err.code})`), { reason: 'missing', cause: err })
      }
    }
    const open = async () => {
      const db = leveldown(dir)
      db.supports = MANIFEST.supports ??= db.supports
      // LevelDB forgets a log it could not open (out of descriptors): log-guard.js. In
      // a shadow, the guard's hard links are links to the symbolic links, and what it
      // restores is renamed there, never at `location`; a failed open's shadow is
      // removed, and the next open replays every log from a new one.
      const replayed = await guardedOpen(dir, {
        open: () => new Promise((resolve, reject) => {
          db.open({ ...DEFAULTS, ...tuning, createIfMissing, errorIfExists }, (err) => (err ? reject(classifyOpenError(err)) : resolve()))
        }),
        close: () => new Promise((resolve) => db.close(() => resolve())),
        classify: (status) => classifyOpenError(new Error(status))
      })
      return { db, replayed }
    }
    let opened
    try {
      opened = await open()
    } catch (err) {
      // What a power cut left of LevelDB's own steps (power-cut.js); never in a shadow,
      // whose files are the store's own.
      if (shadow || err.reason !== 'damaged' || !(await recoverCut(dir).catch(() => false))) throw err
      opened = await open()
    }
    return new LevelDb(opened.db, location, shard, shadow, tuning.writeBufferSize || WRITE_BUFFER, opened.replayed)
  }

  // What LevelDB dropped from damaged logs when it opened this database: a log record
  // that fails its checksum is dropped, and said so only in the database's LOG file,
  // which each open starts afresh. None when it had no log to replay.
  async droppedOnRecovery () {
    if (!this.#replayed) return []
    const log = await fs.readFile(path.join(this.#dir, 'LOG'), 'utf8').catch(() => '')
    return log.split('\n').filter((line) => /: dropping \d+ bytes; /.test(line)).map((line) => line.replace(/^\S+ \S+ /, ''))
  }

  static async repair (location, shard) {
    try {
      await settleForRepair(location) // logs an interrupted open left aside
    } catch (err) {
      throw classify(err, shard)
    }
    return new Promise((resolve, reject) => leveldown.repair(location, (err) => (err ? reject(classify(err, shard)) : resolve())))
  }

  // Resolves to the value as a Buffer, or undefined if there is none.
  get (key) {
    if (this.#life.closing) return Promise.reject(errors.closed())
    return new Promise((resolve, reject) => {
      this.#db.get(key, { asBuffer: true, fillCache: false }, (err, value) => {
        if (!err) resolve(value)
        else if (/^NotFound\b/.test(err.message)) resolve(undefined)
        else reject(classify(err, this.shard))
      })
    })
  }

  // The binding copies every key and value before this returns: callers may reuse their
  // Buffers at once (data/record-pool.js does). Keep the call synchronous on every path.
  batch (ops, { sync = false } = {}) {
    return this.#write((done) => this.#db.batch(ops, { sync }, done), sync)
  }

  put (key, value, { sync = false } = {}) {
    return this.#write((done) => this.#db.put(key, value, { sync }, done), sync)
  }

  clear (range) {
    return this.#write((done) => this.#db.clear(range, done))
  }

  // sync: the write is durable when the promise resolves. LevelDB syncs the log it
  // wrote to, but not the directory after starting a new log, which it does when it
  // switches memtables: on a filesystem that makes a name durable only with its
  // directory, a synced write into a new log would not survive a power cut. LevelDB
  // syncs the directory with the manifest once the old memtable is in a table, so the
  // directory is synced here only when a switch may be newer than that: during a
  // compactRange() (which switches whatever the memtable holds), or while LevelDB holds
  // more than one memtable's worth (#mayHaveNewLog).
  #write (fn, sync = false) {
    if (this.#life.closing) return Promise.reject(errors.closed())
    if (this.readOnly) return Promise.reject(this.#refused())
    this.written = true
    this.#writesBegun++
    const written = this.#writeOnce(fn)
    if (!sync) return written
    const compacting = this.#compactions > 0
    const compactionsBegun = this.#compactionsBegun
    return written.then(() => {
      if (!compacting && compactionsBegun === this.#compactionsBegun && !this.#mayHaveNewLog()) return
      return this.#syncDir()
    })
  }

  // A write switches memtables when it finds the memtable past its size, and the old
  // one is counted by memoryUsage() until it is in a table: below one memtable's size,
  // no switch is waiting for its directory sync. Once closing, LevelDB may stop before
  // it writes that table: the directory is synced.
  #mayHaveNewLog () {
    return this.#life.closing || this.memoryUsage() > this.#writeBuffer
  }

  // Out of descriptors is tried again a few times. A failure is EIO (never a full disk,
  // which would have the write tried again), marked madeNotDurable(): the batch was
  // applied and is visible, but may not survive a power cut, so whoever wrote it must
  // not undo it as if it had failed.
  async #syncDir () {
    for (let attempt = 1; ; attempt++) {
      try {
        return await syncDir(this.#dir)
      } catch (err) {
        if (attempt < DIR_SYNC_ATTEMPTS && RETRIED.has(err.code)) {
          await new Promise((resolve) => setTimeout(resolve, 10 * attempt))
          continue
        }
        throw notDurable(this.#what(), this.shard, err)
      }
    }
  }

  #writeOnce (fn) {
    return new Promise((resolve, reject) => {
      let ended = false
      const done = (err) => {
        if (ended) return
        ended = true
        this.#writesEnded++
        if (!err) return resolve()
        // LevelDB keeps a failed background write (a full disk, say) and refuses every
        // later write until the database is reopened: remember that it needs that.
        const classified = classify(err, this.shard)
        if (classified.code !== 'ECLOSED') this.failed = classified
        reject(classified)
      }
      try {
        fn(done)
      } catch (err) {
        done(err) // thrown before the binding took the write: it ended
      }
    })
  }

  // A mark of the writes so far, undefined while one is in flight. This process is the
  // database's only writer (LevelDB's lock), so what a read returned after a mark is
  // still current while writeMark() returns that mark.
  writeMark () {
    return this.#writesBegun === this.#writesEnded ? this.#writesBegun : undefined
  }

  // An iterator over a snapshot taken now. prefetch: entries fetched ahead of the
  // consumer, so the binding reads the next ones on its thread meanwhile.
  iterator ({ prefetch = 0, ...options } = {}) {
    if (this.#life.closing) throw errors.closed()
    let binding
    try {
      binding = this.#db.iterator({ keyAsBuffer: false, valueAsBuffer: true, fillCache: false, ...options })
    } catch (err) {
      throw classify(err, this.shard)
    }
    const iterator = new Iterator(binding, this.shard, prefetch, () => this.#iterators.delete(iterator))
    this.#iterators.add(iterator)
    return iterator
  }

  // Yields every entry of iterator(options) and ends the iterator however the loop ends.
  async * scan (options) {
    const it = this.iterator(options)
    try {
      for (let entry = await it.next(); entry; entry = await it.next()) yield entry
    } finally {
      await it.end()
    }
  }

  approximateSize (start, end) {
    if (this.#life.closing) return Promise.reject(errors.closed())
    return new Promise((resolve, reject) => {
      this.#db.approximateSize(start, end, (err, size) => (err ? reject(classify(err, this.shard)) : resolve(size)))
    })
  }

  compactRange (start, end) {
    if (this.#life.closing) return Promise.reject(errors.closed())
    if (this.readOnly) return Promise.reject(this.#refused())
    this.#compactions++
    this.#compactionsBegun++
    return new Promise((resolve, reject) => {
      this.#db.compactRange(start, end, (err) => (err ? reject(classify(err, this.shard)) : resolve()))
    }).finally(() => { this.#compactions-- })
  }

  // LevelDB's estimate of the memory it holds for this database: its memtables and its
  // block cache. 0 once closing (the binding crashes on a call after close).
  memoryUsage () {
    if (this.#life.closing) return 0
    return Number(this.#db.getProperty('leveldb.approximate-memory-usage')) || 0
  }

  // Writes the memtable to a table file (LevelDB's CompactRange flushes it first), so
  // the next open has no log to replay: reopening then writes only a small manifest.
  async flush () {
    const mark = this.writeMark()
    await this.compactRange('\x00', '\x00')
    // Nothing was in flight when it began, nor began since: the memtable holds nothing.
    if (mark !== undefined && this.writeMark() === mark) this.written = false
  }

  #refused () {
    return errors.readOnly(this.#what(), { shard: this.shard })
  }

  #what () {
    return this.shard === undefined ? 'the store state' : `shard ${shardName(this.shard)}`
  }

  get status () {
    return this.#life.status
  }

  // Every caller's promise settles once the database is closed and its lock released.
  close () {
    return this.#life.close(async () => {
      try {
        await Promise.all([...this.#iterators].map((it) => it.end()))
        await new Promise((resolve, reject) => this.#db.close((err) => (err ? reject(classify(err, this.shard)) : resolve())))
      } finally {
        if (this.#shadow) await this.#shadow.remove()
        HELD.delete(this.#held)
      }
    })
  }
}

// The failure of a synced write to `what` that was made, whose directory sync then
// failed with `cause`.
function notDurable (what, shard, cause) {
  const failure = errors.system(what, { code: 'EIO', message: `a synced write was made, but may not survive a power cut: its directory could not be synced (${cause.message})` }, { shard })
  failure.cause = cause
  failure[NOT_DURABLE] = true
  return failure
}

// Whether `err` rejected a synced write that was made (and is visible), but may not be
// durable.
function madeNotDurable (err) {
  return Boolean(err && err[NOT_DURABLE])
}

module.exports = { LevelDb, DEFAULTS, WRITE_BUFFER, madeNotDurable, notDurable }

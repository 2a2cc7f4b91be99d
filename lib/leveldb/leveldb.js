'use strict'

// The adapter over an open database: with iterator.js and open.js, the only code that
// touches the LevelDB binding. Every error the binding reports leaves through classify.js.
const fs = require('node:fs/promises')
const path = require('node:path')
const leveldown = require('leveldown')
const { openDatabase, release, DEFAULTS, WRITE_BUFFER } = require('./open')
const { settleForRepair } = require('./log-guard')
const { Iterator } = require('./iterator')
const { classify } = require('./classify')
const { shardName } = require('../base/shard-names')
const errors = require('../api/errors')
const { Lifecycle } = require('../api/lifecycle')
const { syncDir } = require('../base/sync-dir')

// A directory sync that failed for want of descriptors is tried again.
const RETRIED = new Set(['EMFILE', 'ENFILE'])
const DIR_SYNC_ATTEMPTS = 4

// Marks a synced write that was applied but whose directory sync failed: madeNotDurable().
const NOT_DURABLE = Symbol('kfs.notDurable')

class LevelDb {
  #db
  #life = new Lifecycle('open') // the binding crashes on a call after close: every call checks it
  #iterators = new Set()
  #dir // where LevelDB has it open: `location`, or its shadow
  #shadow
  #writesBegun = 0
  #writesEnded = 0
  #writeBuffer
  #held // what open.js holds for it
  #compactions = 0 // compactRange() calls in flight
  #compactionsBegun = 0
  #replayed

  // opened: what open.js resolved to. shard: the shard index, named by its errors.
  constructor ({ binding, dir, shadow, held, writeBuffer, replayed }, location, shard) {
    this.#db = binding
    this.#replayed = replayed
    this.location = location
    this.shard = shard
    this.#shadow = shadow
    this.#held = held
    this.#writeBuffer = writeBuffer
    this.#dir = dir
    this.readOnly = Boolean(shadow) // every write is refused with EROFS
    this.failed = undefined // a write failed for a reason LevelDB keeps until reopened
    this.written = false // anything written since it was opened, or last flushed
  }

  // Rejects as open.js's openDatabase() does.
  static async open (location, { shard, ...options } = {}) {
    return new LevelDb(await openDatabase(location, options), location, shard)
  }

  // Log records that failed their checksum at open: LevelDB drops them, saying so only in
  // LOG, which each open starts afresh.
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

  // The value as a Buffer, or undefined.
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

  // The binding copies every key and value before this returns, so callers may reuse
  // their Buffers at once (data/record-pool.js): keep the call synchronous on every path.
  batch (ops, { sync = false } = {}) {
    return this.#write((done) => this.#db.batch(ops, { sync }, done), sync)
  }

  put (key, value, { sync = false } = {}) {
    return this.#write((done) => this.#db.put(key, value, { sync }, done), sync)
  }

  clear (range) {
    return this.#write((done) => this.#db.clear(range, done))
  }

  // sync: durable when the promise resolves. LevelDB syncs the log, not the directory
  // after a memtable switch starts a new log; it does with the manifest once the old
  // memtable is in a table. So it is synced here when a switch may be newer: during a
  // compactRange() (which switches any memtable), or past one memtable's worth.
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

  // A switch may wait for its directory sync only past one memtable's worth (memoryUsage()
  // counts the old one until it is in a table), or once closing (LevelDB may stop first).
  #mayHaveNewLog () {
    return this.#life.closing || this.memoryUsage() > this.#writeBuffer
  }

  // A failure is EIO (never ENOSPC, which would have the write tried again), marked
  // madeNotDurable(): the batch is applied and visible, so its writer must not undo it.
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
        // LevelDB refuses every write after a failed background write until reopened.
        const classified = classify(err, this.shard)
        if (classified.code !== 'ECLOSED') this.failed = classified
        reject(classified)
      }
      try {
        fn(done)
      } catch (err) {
        done(err) // thrown before the binding took the write
      }
    })
  }

  // A mark of the writes so far, undefined while one is in flight. This process is the
  // only writer (LevelDB's lock): a read made after a mark holds while the mark does.
  writeMark () {
    return this.#writesBegun === this.#writesEnded ? this.#writesBegun : undefined
  }

  // A mark of the writes and compactions begun so far, undefined while either is in flight:
  // a mark that did not change says the database's files changed only by LevelDB's own
  // background work.
  changeMark () {
    const writes = this.writeMark()
    return writes === undefined || this.#compactions > 0 ? undefined : `${writes}.${this.#compactionsBegun}`
  }

  // An iterator over a snapshot taken now; prefetch: entries read ahead of the consumer.
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

  // Every entry of iterator(options); the iterator ends however the loop ends.
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

  // LevelDB's estimate of its memtables and block cache; 0 once closing.
  memoryUsage () {
    if (this.#life.closing) return 0
    return Number(this.#db.getProperty('leveldb.approximate-memory-usage')) || 0
  }

  // The bytes of its logs: what is written but not yet in a table (approximateSize leaves it
  // out). A log removed meanwhile (a flush) counts 0.
  async logBytes () {
    const names = await fs.readdir(this.#dir).catch(() => [])
    const sizes = await Promise.all(names.filter((name) => name.endsWith('.log')).map((name) => fs.stat(path.join(this.#dir, name)).then((s) => s.size, () => 0)))
    return sizes.reduce((sum, n) => sum + n, 0)
  }

  // The memtable to a table (CompactRange flushes first): the next open replays no log.
  async flush () {
    const mark = this.writeMark()
    await this.compactRange('\x00', '\x00')
    // Nothing in flight when it began, nor begun since: the memtable is empty.
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

  close () {
    return this.#life.close(async () => {
      try {
        await Promise.all([...this.#iterators].map((it) => it.end()))
        await new Promise((resolve, reject) => this.#db.close((err) => (err ? reject(classify(err, this.shard)) : resolve())))
      } finally {
        if (this.#shadow) await this.#shadow.remove()
        release(this.#held)
      }
    })
  }
}

// A synced write to `what` was made, then its directory sync failed with `cause`.
function notDurable (what, shard, cause) {
  const failure = errors.system(what, { code: 'EIO', message: `a synced write was made, but may not survive a power cut: its directory could not be synced (${cause.message})` }, { shard })
  failure.cause = cause
  failure[NOT_DURABLE] = true
  return failure
}

// Whether `err` rejected a synced write that was made (and is visible) but not durable.
function madeNotDurable (err) {
  return Boolean(err && err[NOT_DURABLE])
}

module.exports = { LevelDb, DEFAULTS, WRITE_BUFFER, madeNotDurable, notDurable }

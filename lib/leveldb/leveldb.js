'use strict'

// With iterator.js, the only code that touches the LevelDB binding, so that it can be
// swapped. Every error the binding reports leaves lib/leveldb/ through classify.js.
const fs = require('node:fs/promises')
const path = require('node:path')
const leveldown = require('leveldown')
const { guardedOpen, settleForRepair } = require('./log-guard')
const { Iterator } = require('./iterator')
const { classify, classifyOpenError } = require('./classify')
const errors = require('../api/errors')

// Tuned for 128 KiB values (perf/throughput.js): no compression (stored files are
// mostly compressed or encrypted already); LevelDB's default 4 MiB write buffer, as
// larger ones bought no measurable write speed for more memory per open shard; table
// files large enough that a full 32 GiB shard is not tens of thousands of files.
const DEFAULTS = {
  compression: false,
  writeBufferSize: 4 * 1024 * 1024,
  maxFileSize: 32 * 1024 * 1024,
  cacheSize: 4 * 1024 * 1024,
  maxOpenFiles: 64
}

class LevelDb {
  #db
  #closed = false // the binding crashes on a call after close: every call checks this
  #iterators = new Set()

  // shard: the shard index this database is, named by the errors it raises.
  constructor (db, location, shard) {
    this.#db = db
    this.location = location
    this.shard = shard
    this.failed = undefined // a write failed for a reason LevelDB keeps until reopened
    this.written = false // anything written since it was opened
  }

  // Resolves to a LevelDb or rejects with a classified error carrying a `reason`:
  // 'missing', 'locked', 'system' (an OS error, with its code) or 'damaged'.
  static async open (location, { createIfMissing = false, errorIfExists = false, shard, ...options } = {}) {
    const tuning = Object.fromEntries(Object.entries(options).filter(([, value]) => value !== undefined))
    // LevelDB creates the directory, LOCK and LOG before it finds no database there:
    // without createIfMissing, leave a place holding no database untouched.
    if (!createIfMissing) {
      try {
        await fs.access(path.join(location, 'CURRENT'))
      } catch (err) {
        throw Object.assign(new Error(`${location}: no LevelDB database here (${err.code})`), { reason: 'missing', cause: err })
      }
    }
    const db = leveldown(location)
    // LevelDB forgets a log it could not open (out of descriptors): log-guard.js.
    await guardedOpen(location, {
      open: () => new Promise((resolve, reject) => {
        db.open({ ...DEFAULTS, ...tuning, createIfMissing, errorIfExists }, (err) => (err ? reject(classifyOpenError(err)) : resolve()))
      }),
      close: () => new Promise((resolve) => db.close(() => resolve())),
      classify: (status) => classifyOpenError(new Error(status))
    })
    return new LevelDb(db, location, shard)
  }

  // What LevelDB dropped from damaged logs when it last opened the database at
  // `location`: a log record that fails its checksum is dropped, and said so only in
  // the database's LOG file, which each open starts afresh.
  static async droppedOnRecovery (location) {
    const log = await fs.readFile(path.join(location, 'LOG'), 'utf8').catch(() => '')
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
    if (this.#closed) return Promise.reject(errors.closed())
    return new Promise((resolve, reject) => {
      this.#db.get(key, { asBuffer: true, fillCache: false }, (err, value) => {
        if (!err) resolve(value)
        else if (/^NotFound\b/.test(err.message)) resolve(undefined)
        else reject(classify(err, this.shard))
      })
    })
  }

  batch (ops, { sync = false } = {}) {
    return this.#write((done) => this.#db.batch(ops, { sync }, done))
  }

  put (key, value, { sync = false } = {}) {
    return this.#write((done) => this.#db.put(key, value, { sync }, done))
  }

  clear (range) {
    return this.#write((done) => this.#db.clear(range, done))
  }

  #write (fn) {
    if (this.#closed) return Promise.reject(errors.closed())
    this.written = true
    return new Promise((resolve, reject) => {
      fn((err) => {
        if (!err) return resolve()
        // LevelDB keeps a failed background write (a full disk, say) and refuses every
        // later write until the database is reopened: remember that it needs that.
        const classified = classify(err, this.shard)
        if (classified.code !== 'ECLOSED') this.failed = classified
        reject(classified)
      })
    })
  }

  // An iterator over a snapshot taken now. prefetch: entries fetched ahead of the
  // consumer, so the binding reads the next ones on its thread meanwhile.
  iterator ({ prefetch = 0, ...options } = {}) {
    if (this.#closed) throw errors.closed()
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
    if (this.#closed) return Promise.reject(errors.closed())
    return new Promise((resolve, reject) => {
      this.#db.approximateSize(start, end, (err, size) => (err ? reject(classify(err, this.shard)) : resolve(size)))
    })
  }

  compactRange (start, end) {
    if (this.#closed) return Promise.reject(errors.closed())
    return new Promise((resolve, reject) => {
      this.#db.compactRange(start, end, (err) => (err ? reject(classify(err, this.shard)) : resolve()))
    })
  }

  // Writes the memtable to a table file (LevelDB's CompactRange flushes it first), so
  // the next open has no log to replay: reopening then writes only a small manifest.
  flush () {
    return this.compactRange('\x00', '\x00')
  }

  async close () {
    if (this.#closed) return
    this.#closed = true
    await Promise.all([...this.#iterators].map((it) => it.end()))
    await new Promise((resolve, reject) => this.#db.close((err) => (err ? reject(classify(err, this.shard)) : resolve())))
  }
}

module.exports = { LevelDb, DEFAULTS }

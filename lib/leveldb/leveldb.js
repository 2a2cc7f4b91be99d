'use strict'

// The only module that touches the LevelDB binding, so it can be swapped. Every error
// the binding reports leaves this module through classify(): with a code from the
// README's table, naming the shard when the database is one.
const fs = require('node:fs/promises')
const path = require('node:path')
const leveldown = require('leveldown')
const { shardName } = require('../shard/routing')
const { guardedOpen, settleForRepair } = require('./log-guard')
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
    // LevelDB forgets a log it could not open (out of descriptors): lib/log-guard.js.
    await guardedOpen(location, {
      open: () => new Promise((resolve, reject) => {
        db.open({ ...DEFAULTS, ...tuning, createIfMissing, errorIfExists }, (err) => (err ? reject(classifyOpenError(err)) : resolve()))
      }),
      close: () => new Promise((resolve) => db.close(() => resolve())),
      classify: (status) => classifyOpenError(new Error(status))
    })
    return new LevelDb(db, location, shard)
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

class Iterator {
  #binding
  #shard
  #prefetch
  #onEnd
  #queue = []
  #fetching = false
  #exhausted = false
  #failure
  #waiting = [] // resolved whenever a fetch completes
  #ended

  constructor (binding, shard, prefetch, onEnd) {
    this.#binding = binding
    this.#shard = shard
    this.#prefetch = prefetch
    this.#onEnd = onEnd
  }

  // Resolves to the next { key, value }, or undefined at the end.
  async next () {
    if (this.#ended) throw errors.closed()
    this.#fetch()
    while (this.#queue.length === 0 && !this.#exhausted) await new Promise((resolve) => this.#waiting.push(resolve))
    if (this.#queue.length === 0 && this.#failure) throw this.#failure
    const entry = this.#queue.shift()
    this.#fetch()
    return entry
  }

  #fetch () {
    if (this.#fetching || this.#exhausted || this.#ended || this.#queue.length > this.#prefetch) return
    this.#fetching = true
    this.#binding.next((err, key, value) => {
      this.#fetching = false
      if (err) [this.#failure, this.#exhausted] = [classify(err, this.#shard), true]
      else if (key === undefined && value === undefined) this.#exhausted = true
      else this.#queue.push({ key, value })
      this.#waiting.splice(0).forEach((resolve) => resolve())
      if (this.#queue.length > 0 || this.#exhausted) this.#fetch()
    })
  }

  // Ends the iterator once the fetch in flight is done (the binding refuses end()
  // during a next()); ending twice is harmless.
  end () {
    if (!this.#ended) {
      this.#ended = (async () => {
        while (this.#fetching) await new Promise((resolve) => this.#waiting.push(resolve))
        this.#queue = []
        this.#onEnd()
        await new Promise((resolve) => this.#binding.end(() => resolve()))
      })()
    }
    return this.#ended
  }
}

// LevelDB reports OS errors by their strerror text only.
const SYSTEM_ERRORS = {
  'Too many open files': 'EMFILE',
  'Permission denied': 'EACCES',
  'No space left on device': 'ENOSPC',
  'Read-only file system': 'EROFS',
  'Input/output error': 'EIO',
  'Cannot allocate memory': 'ENOMEM',
  'Disk quota exceeded': 'EDQUOT'
}

// The one classifier: damage becomes ECORRUPT naming the shard, an OS failure its own
// code (a full disk ENOSPC), a closed database ECLOSED, anything else EIO.
function classify (err, shard) {
  if (err.code) return err // classified already
  const cause = err.cause && err.cause.message ? err.cause : err
  const message = String(cause.message || cause)
  const system = Object.keys(SYSTEM_ERRORS).find((text) => message.includes(text))
  const where = shard === undefined ? 'the store state' : `shard ${shardName(shard)}`
  if (system === 'No space left on device') return errors.diskFull(where, message, { shard, cause: err })
  if (system) return errors.system(where, { code: SYSTEM_ERRORS[system], message }, { shard, cause: err })
  // A table file that is missing, damaged or cut short (a read past its end is EINVAL).
  if (/Corruption:|No such file or directory|\.(ldb|sst): Invalid argument/.test(message)) {
    const hint = shard === undefined ? '' : `; kfs repair ${shard} may recover it`
    return errors.corrupt(where, `${message}${hint}`, { shard, cause: err })
  }
  if (/Database is not open|not open|after close/i.test(message)) return errors.closed()
  return errors.system(where, { code: 'EIO', message }, { shard, cause: err })
}

function classifyOpenError (err) {
  const cause = err.cause || err
  const message = String(cause.message || cause)
  let reason = 'damaged'
  if (/does not exist \(create_if_missing is false\)/.test(message)) reason = 'missing'
  else if (/\/LOCK: (already held by process|Resource temporarily unavailable)/.test(message)) reason = 'locked'
  else if (Object.keys(SYSTEM_ERRORS).some((text) => message.includes(text))) reason = 'system'
  return Object.assign(new Error(message), { reason, code: reason === 'system' ? classify(cause).code : undefined, cause })
}

module.exports = { LevelDb, classify, DEFAULTS }

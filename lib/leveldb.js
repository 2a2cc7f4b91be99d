'use strict'

// The only module that touches the LevelDB binding, so it can be swapped.
const fs = require('node:fs/promises')
const path = require('node:path')
const levelup = require('levelup')
const leveldown = require('leveldown')

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

const errors = require('./errors')

// Iterators not yet ended, and their database: the binding never calls back an end()
// made after its database closed, so close() ends them first.
const liveIterators = new WeakMap() // iterator -> its LevelDb

class LevelDb {
  constructor (db) {
    this.db = db
    this.iterators = new Set()
    this.shard = undefined // set by a Shard: damage found while reading then names it
  }

  // Resolves to a LevelDb or rejects with the binding's error as `cause` and a
  // `reason`: 'missing', 'locked', 'system' (with `code`, an OS error such as EMFILE)
  // or 'failed' (the database is damaged).
  static async open (location, { createIfMissing = false, errorIfExists = false, ...options } = {}) {
    // LevelDB creates the directory, LOCK and LOG before it finds no database there:
    // without createIfMissing, leave a place holding no database untouched.
    if (!createIfMissing) {
      try {
        await fs.access(path.join(location, 'CURRENT'))
      } catch (err) {
        throw Object.assign(new Error(`${location}: no LevelDB database here (${err.code})`), { reason: 'missing', cause: err })
      }
    }
    return new Promise((resolve, reject) => {
      const db = levelup(leveldown(location), { ...DEFAULTS, ...options, createIfMissing, errorIfExists }, (err) => {
        if (err) reject(classifyOpenError(err))
        else resolve(new LevelDb(db))
      })
    })
  }

  async get (key) {
    try {
      return await this.db.get(key, { asBuffer: true, fillCache: false })
    } catch (err) {
      if (err.notFound) return undefined
      throw classifyReadError(err.cause || err, this)
    }
  }

  static repair (location) {
    return new Promise((resolve, reject) => leveldown.repair(location, (err) => (err ? reject(err) : resolve())))
  }

  batch (ops, { sync = false } = {}) {
    return this.db.batch(ops, { sync })
  }

  put (key, value, { sync = false } = {}) {
    return this.db.put(key, value, { sync })
  }

  // A raw binding iterator; it reads from a snapshot taken when it is created.
  iterator (options) {
    const iterator = this.db.db.iterator({ keyAsBuffer: false, valueAsBuffer: true, fillCache: false, ...options })
    this.iterators.add(iterator)
    liveIterators.set(iterator, this)
    return iterator
  }

  clear (range) {
    return this.db.clear(range)
  }

  approximateSize (start, end) {
    return new Promise((resolve, reject) => {
      this.db.db.approximateSize(start, end, (err, size) => (err ? reject(err) : resolve(size)))
    })
  }

  compactRange (start, end) {
    return new Promise((resolve, reject) => {
      this.db.db.compactRange(start, end, (err) => (err ? reject(err) : resolve()))
    })
  }

  async close () {
    await Promise.all([...this.iterators].map(end))
    return this.db.close()
  }
}

// Promise wrappers over an iterator's callback API.
function next (iterator) {
  return new Promise((resolve, reject) => {
    iterator.next((err, key, value) => {
      if (err) reject(classifyReadError(err, liveIterators.get(iterator)))
      else resolve(key === undefined && value === undefined ? undefined : { key, value })
    })
  })
}

// Resolves once the iterator is ended; ending one twice is harmless.
function end (iterator) {
  const owner = liveIterators.get(iterator)
  if (owner) owner.iterators.delete(iterator)
  if (iterator._ended) return Promise.resolve()
  return new Promise((resolve) => iterator.end(() => resolve()))
}

// Damage met while reading (a bad block, a table file gone) becomes ECORRUPT, naming
// the shard when the database is one.
function classifyReadError (err, db) {
  if (err.code || !/Corruption:|No such file or directory/.test(err.message)) return err
  const shard = db && db.shard
  if (shard === undefined) return Object.assign(err, { code: 'ECORRUPT' })
  return errors.corrupt(`shard ${errors.shardName(shard)}`, `${err.message}; kfs repair ${shard} may recover it`, { shard, cause: err })
}

// LevelDB reports OS errors by their strerror text only.
const SYSTEM_ERRORS = {
  'Too many open files': 'EMFILE',
  'Permission denied': 'EACCES',
  'No space left on device': 'ENOSPC',
  'Read-only file system': 'EROFS',
  'Input/output error': 'EIO',
  'Cannot allocate memory': 'ENOMEM'
}

function classifyOpenError (err) {
  const cause = err.cause || err
  const message = String(cause.message || cause)
  const system = Object.keys(SYSTEM_ERRORS).find((text) => message.includes(text))
  let reason = 'failed'
  let code
  if (/does not exist \(create_if_missing is false\)/.test(message)) reason = 'missing'
  else if (/\/LOCK: (already held by process|Resource temporarily unavailable)/.test(message)) reason = 'locked'
  else if (system) [reason, code] = ['system', SYSTEM_ERRORS[system]]
  return Object.assign(new Error(message), { reason, code, cause })
}

module.exports = { LevelDb, next, end }

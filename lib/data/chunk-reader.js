'use strict'

const { contentHash } = require('../api/keys')
const { readAheadShape, MAX_EACH } = require('./read-ahead')
const { headerOf, payload, intact } = require('../shard/chunk-record')
const { OFFLOAD_DIGEST_BYTES } = require('./digester')
const { decodeHead } = require('../shard/head-record')
const { gone } = require('../shard/records')
const errors = require('../api/errors')
const { UNCHECKED } = require('../api/args') // perf/ only: skips the chunk digests

// A reader gives up after this many versions in a row replaced before it read them.
const MAX_ATTEMPTS = 100
// Metadata read, per database, reused while it had no write since (LevelDb#writeMark).
const MAX_HINTS = 1024
const metaHints = new WeakMap() // LevelDb -> Map(key -> { mark, meta })

// Reads bytes [start, end] (inclusive, clamped to the file) of one committed version.
// The iterator reads a snapshot: a concurrent overwrite or unlink cannot mix versions or
// cut the file short. Every chunk's index, length and digest (format 2 and 3) are
// checked before any of its bytes are handed out; a head's data is checked with the
// head. Format 1 has no chunk digests: only a whole-file read of it is checked (SHA-256,
// before the last chunk is handed out).
class ChunkReader {
  // sha256: 'always' checks a whole read's SHA-256 even with chunk digests (verify());
  // false never (readFile checks it on the Digester's thread).
  constructor ({ lease, share, meta, chunkSize, first, last, start, end, iterator, entries = [], sha256, unchecked = false }) {
    Object.assign(this, { lease, share, shard: lease.shard, meta, chunkSize, last, start, end, iterator, unchecked })
    this.index = first
    this.entries = entries // chunks read by open(): the first, or all of a short range
    this.hash = this.checksSha256(sha256) ? contentHash() : undefined
    this.length = Math.max(0, end - start + 1)
  }

  checksSha256 (sha256) {
    const whole = this.start === 0 && this.end === this.meta.size - 1
    return whole && (sha256 === 'always' || (sha256 !== false && !this.meta.chunkDigest))
  }

  // A reader of `key` on the lease ({ shard, release }), released by close() or a failed
  // open. readAhead: the store's ReadAhead, which lends the reader its share (what it may
  // fetch ahead of its consumer); without it, the most a reader takes. `meta`: the version
  // to try first (readSmall's). `signal` ends a wait for a place among the gets in flight.
  static async open ({ lease, readAhead, ...options }) {
    const share = readAhead ? readAhead.take() : { bytes: MAX_EACH, give () {}, get: (db, key) => db.get(key) }
    try {
      return await ChunkReader.#open({ ...options, lease, share })
    } catch (err) {
      share.give()
      lease.release()
      throw err
    }
  }

  // `withTrash`: a file in the trash is read too (verify, repair).
  static #open ({ lease, share, key, chunkSize, range = {}, meta, sha256, unchecked, signal, withTrash = false }) {
    const { shard } = lease
    const aheadBytes = share.bytes
    const { chunkKeys } = shard
    const get = (k) => share.get(shard.db, k, signal)
    // A verifying read (sha256 'always') reads everything again. A head is checked as
    // read, even when the caller checks the chunks (`unchecked`: readFile).
    return onVersion(shard, key, { meta, fresh: sha256 === 'always', get, restoredAt: withTrash ? Infinity : undefined }, async ({ meta, data }) => {
      const start = range.start || 0
      if (start > meta.size) throw errors.invalidValue('start', `(${start}) is beyond the end of file ${key} (${meta.size} bytes)`, { key })
      const end = Math.min(range.end === undefined ? Infinity : range.end, meta.size - 1)
      const base = { lease, share, meta, chunkSize, start, end, sha256, unchecked }
      if (end < start) return new ChunkReader({ ...base, first: 0, last: -1 })
      if (data) return new ChunkReader({ ...base, first: 0, last: 0, entries: [{ data }] })
      const first = Math.floor(start / chunkSize)
      const last = Math.floor(end / chunkSize)
      // A range within the read-ahead: one get per chunk, all at once, which LevelDB
      // reads on several threads (an iterator takes two trips). Gets see no snapshot: a
      // chunk missing because a commit replaced the version means reading again.
      if (last - first < Math.max(1, Math.floor(aheadBytes / chunkSize))) {
        // Each chunk is checked as it arrives, while LevelDB reads the others.
        const check = meta.chunkDigest && !unchecked
        const keys = Array.from({ length: last - first + 1 }, (_, i) => chunkKeys.key(key, meta.version, first + i))
        const entries = await Promise.all(keys.map((k) => get(k).then((value) => ({ key: k, value, intact: check && value ? intact(k, value) : undefined }))))
        const missing = entries.findIndex((e) => e.value === undefined)
        if (missing === -1) return new ChunkReader({ ...base, first, last, entries })
        return missingChunk(shard, meta, first + missing)
      }
      const firstKey = chunkKeys.key(key, meta.version, first)
      const iterator = shard.db.iterator({ gte: firstKey, lte: chunkKeys.key(key, meta.version, last), ...readAheadShape(aheadBytes, chunkSize) })
      let entry
      try {
        entry = await iterator.next()
      } catch (err) {
        await iterator.end()
        throw err
      }
      if (entry && entry.key === firstKey) return new ChunkReader({ ...base, first, last, iterator, entries: [entry] })
      await iterator.end()
      return missingChunk(shard, meta, first)
    })
  }

  // A file of at most one chunk: { meta, data }, data not copied, checked as read()
  // checks it; else { meta } alone, for open() to try first. Format 3 with data in its
  // head is one get; format 2, a get of its metadata then of its chunk. The gets go
  // through ReadAhead (which bounds them); no share is taken. No metaHints: a hint per
  // file read cost more than it saved (doc/performance.md, "Storj's piece workload").
  static async readSmall ({ lease, readAhead, key, chunkSize, unchecked = false }) {
    const { shard } = lease
    const get = (k) => readAhead.get(shard.db, k)
    const head = await get(key)
    const now = Date.now()
    const first = head !== undefined ? decodeHead(key, head, { unchecked }) : await readVersion(shard, key, { get, unchecked, head })
    if (first && first.data && !gone(first.meta, now, shard.restoredAt)) return first
    return onVersion(shard, key, { first, get, unchecked, now }, async ({ meta, data }) => {
      if (data) return { meta, data }
      // A chunk count that disagrees with the size is the reader's to name; a chunk of
      // OFFLOAD_DIGEST_BYTES or more readFile checks on the digest thread.
      if (meta.chunks > 1 || !meta.chunkDigest || meta.chunks !== Math.ceil(meta.size / chunkSize) || meta.size >= OFFLOAD_DIGEST_BYTES) return { meta }
      if (meta.chunks === 0) return { meta, data: Buffer.alloc(0) }
      const chunkKey = shard.chunkKeys.key(key, meta.version, 0)
      const value = await get(chunkKey)
      if (value === undefined) return missingChunk(shard, meta, 0)
      return { meta, data: chunkData(meta, chunkSize, 0, chunkKey, value, unchecked ? true : undefined) }
    })
  }

  async #nextEntry () {
    if (this.entries.length) return this.entries.shift()
    return this.iterator ? this.iterator.next() : undefined
  }

  async read () {
    if (this.index > this.last) return undefined
    const entry = await this.#nextEntry()
    const { meta, chunkSize } = this
    const index = this.index++
    let data = entry && entry.data // the head's, checked
    if (!data) {
      const expectedKey = this.shard.chunkKeys.key(meta.key, meta.version, index)
      if (!entry || entry.key !== expectedKey) throw errors.integrity(meta.key, `chunk ${index} is missing`, { chunk: index })
      data = chunkData(meta, chunkSize, index, entry.key, entry.value, this.unchecked || entry.intact)
    }
    if (this.hash) {
      this.hash.update(data)
      if (index === this.last) this.#verify()
    }
    const offset = index * chunkSize
    const from = Math.max(0, this.start - offset)
    const to = Math.min(data.length, this.end - offset + 1)
    return from === 0 && to === data.length ? data : data.subarray(from, to)
  }

  #verify () {
    checkDigest(this.meta, this.hash.digest('hex'))
  }

  // Gives back the lease and the read-ahead share.
  async close () {
    const { iterator } = this
    this.iterator = undefined
    this.index = this.last + 1
    this.entries = []
    try {
      if (iterator) await iterator.end()
    } finally {
      this.share.give()
      this.lease.release()
    }
  }
}

// onVersion's fn: a commit replaced its version before the chunks were read.
const REPLACED = Symbol('replaced')
// readVersion's `head` when the caller got none.
const NOT_GOT = Symbol('not got')

// The committed version of `key`: { meta, data (when its head holds them, checked unless
// `unchecked`) }, or undefined. Format 2 and 1 have no head: the metadata record is read.
// `get`: how to read a record. `head`: what a get of the head found just before.
async function readVersion (shard, key, { get = (k) => shard.db.get(k), unchecked = false, head: got = NOT_GOT } = {}) {
  let seen // the version the metadata named when the head was last found missing
  for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
    const head = attempt === 0 && got !== NOT_GOT ? got : await get(key)
    if (head !== undefined) return decodeHead(key, head, { unchecked })
    const meta = await shard.getMeta(key)
    if (!meta) return undefined
    if (meta.format === undefined) return { meta }
    // Written, replaced or removed between the two gets; missing twice with the same
    // version between, the head is lost.
    if (seen === meta.version) throw errors.integrity(key, 'its head record is missing', { chunk: 0 })
    seen = meta.version
  }
  throw replacing(shard, key)
}

const replacing = (shard, key) => errors.shardBusy(shard.index, `kept replacing ${key} while it was being read`)

// fn({ meta, data }) on the current version of `key`, again while it returns REPLACED.
// The first version tried: `first` (readVersion's just before) if given, else read
// afresh if `fresh`, else `meta` if given, else from metaHints. A version expired at
// `now`, or in the trash (trashed after `restoredAt`), is not found.
async function onVersion (shard, key, { first = NOT_GOT, meta, fresh = false, get, unchecked, now = Date.now(), restoredAt = shard.restoredAt }, fn) {
  const read = () => readVersion(shard, key, { get, unchecked })
  for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
    const current = attempt === 0 && first !== NOT_GOT ? first : attempt > 0 || fresh ? await read() : meta ? { meta } : await hinted(shard, key, read)
    if (!current || gone(current.meta, now, restoredAt)) throw errors.notFound(key)
    const result = await fn(current)
    if (result !== REPLACED) return result
  }
  throw replacing(shard, key)
}

// Chunk `index` not found: REPLACED if a commit replaced the version, else EINTEGRITY.
async function missingChunk (shard, meta, index) {
  const now = await readVersion(shard, meta.key)
  // The same version with its data now in its head: its chunk moved there (upgradeHeads).
  if (now && now.meta.version === meta.version && !now.data) throw errors.integrity(meta.key, `chunk ${index} is missing`, { chunk: index })
  return REPLACED
}

// Chunk `index`'s data from its record: its length checked, and its digest (format 2 and
// 3) unless `intactAlready` says it was found intact (true) or damaged (false).
function chunkData (meta, chunkSize, index, key, value, intactAlready) {
  const header = headerOf(meta)
  const expected = index === meta.chunks - 1 ? meta.size - index * chunkSize : chunkSize
  if (value.length !== header + expected) {
    throw errors.integrity(meta.key, `chunk ${index} holds ${value.length - header} bytes, ${expected} expected`, { chunk: index })
  }
  if (!header) return value
  if (!(intactAlready ?? intact(key, value))) throw damagedChunk(meta.key, index)
  return payload(value)
}

// read(), or the metadata from metaHints while the database had no write since. A head
// holding data is not hinted: the hint would keep the data, and saves no get.
async function hinted (shard, key, read) {
  const { db } = shard
  const mark = db.writeMark()
  const hints = metaHints.get(db)
  const hint = hints && hints.get(key)
  if (hint && mark !== undefined && hint.mark === mark) return { meta: hint.meta }
  const version = await read()
  if (version && !version.data && mark !== undefined && db.writeMark() === mark) {
    const meta = Object.freeze(version.meta)
    if (!hints || hints.size >= MAX_HINTS) metaHints.set(db, new Map([[key, { mark, meta }]]))
    else hints.set(key, { mark, meta })
  }
  return version
}

function damagedChunk (key, index) {
  return errors.integrity(key, `chunk ${index} does not match its CRC32`, { chunk: index })
}

function checkDigest (meta, found) {
  if (found !== meta.sha256) throw errors.integrity(meta.key, 'its content does not match its SHA-256', { expected: meta.sha256, found })
}

module.exports = { ChunkReader, checkDigest, damagedChunk, UNCHECKED, readVersion }

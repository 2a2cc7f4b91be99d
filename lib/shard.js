'use strict'

const fs = require('node:fs/promises')
const path = require('node:path')
const crypto = require('node:crypto')
const { LevelDb, next, end } = require('./leveldb')
const format = require('./format')
const errors = require('./errors')

// One S-bucket: a LevelDB holding chunks, metadata and its own exact accounting.
// Accounting (`used`, `files`) changes only inside the same atomic batch that commits
// or removes a file, so it is exact after any crash.
class Shard {
  constructor ({ index, location, db, cap, chunkKeys, sync, account }) {
    db.shard = index
    this.index = index
    this.name = errors.shardName(index)
    this.location = location
    this.db = db
    this.cap = cap
    this.chunkKeys = chunkKeys
    this.sync = sync
    this.used = account.used
    this.files = account.files
    this.reserved = 0
    this.writing = new Set() // versions being written by this process right now
    this.tail = Promise.resolve()
  }

  // Opens the shard at `location`. With `create`, the shard must not exist yet: it is
  // built in `tmpDir` and renamed into place, so a crash mid-creation never leaves a
  // half-made shard that would later look corrupt. Without `create`, a shard that
  // LevelDB cannot open is reported as corrupt, never recreated.
  static async open ({ index, location, tmpDir, cap, chunkKeys, sync, create }) {
    const name = errors.shardName(index)
    let db
    try {
      if (create) await createShard(location, tmpDir)
      db = await LevelDb.open(location)
    } catch (err) {
      if (err.reason === 'locked') throw errors.busy(location, err)
      if (err.reason === 'system' || err.syscall) throw errors.system(`shard ${name} could not be opened`, err, { shard: index })
      throw damaged(index, err)
    }
    try {
      const raw = await db.get(format.ACCOUNT)
      if (raw === undefined) throw new Error('its accounting record is missing')
      const account = JSON.parse(raw)
      return new Shard({ index, location, db, cap, chunkKeys, sync, account })
    } catch (err) {
      await db.close()
      throw err.code === 'ECORRUPT' && err.shard === index ? err : damaged(index, err)
    }
  }

  // Runs fn alone among this shard's commits, so accounting read-modify-writes and
  // "last commit wins" hold under any concurrency.
  exclusive (fn) {
    const run = this.tail.then(fn)
    this.tail = run.catch(() => {})
    return run
  }

  get free () {
    return Math.max(0, this.cap - this.used - this.reserved)
  }

  // Claims space for bytes about to be written; ENOSPC if the shard cannot hold them
  // next to what is stored and what other writes in flight have claimed.
  reserve (bytes) {
    const reservation = new Reservation(this)
    reservation.add(bytes)
    return reservation
  }

  async getMeta (key) {
    const raw = await this.db.get(format.metaKey(key))
    return raw === undefined ? undefined : { key, ...format.decodeMeta(raw, `shard ${this.name}`) }
  }

  // Writes chunk records of an uncommitted version. The first batch of a version also
  // records it as pending, so that a crash before commit can be cleaned up on reopen
  // without scanning the shard.
  writeChunks (key, version, firstIndex, chunks) {
    const ops = []
    if (firstIndex === 0) ops.push({ type: 'put', key: format.pendingKey(version), value: key })
    chunks.forEach((value, i) => ops.push({ type: 'put', key: this.chunkKeys.key(key, version, firstIndex + i), value }))
    return this.db.batch(ops)
  }

  // Makes `meta` the visible version of its key in one atomic batch: metadata, the
  // removal of the previous version's chunks and of the pending record, and the new
  // accounting. Consumes the reservation. `cancelled()` is asked once the commit's turn
  // comes: a write destroyed while waiting for it is not committed.
  commit (meta, reservation, cancelled = () => false) {
    return this.exclusive(async () => {
      if (cancelled()) throw errors.cancelled(meta.key)
      const old = await this.getMeta(meta.key)
      const ops = [{ type: 'put', key: format.metaKey(meta.key), value: format.encodeMeta(meta) }]
      if (meta.chunks > 0) ops.push({ type: 'del', key: format.pendingKey(meta.version) })
      if (old) this.#deleteChunks(ops, meta.key, old)
      await this.#apply(ops, { used: this.used - (old ? old.size : 0) + meta.size, files: this.files + (old ? 0 : 1) })
      reservation.release()
      // Inside the exclusive section: discardAbandoned(), which runs there too, can
      // never see this version as pending and no longer being written.
      this.writing.delete(meta.version)
    })
  }

  unlink (key) {
    return this.exclusive(async () => {
      const old = await this.getMeta(key)
      if (!old) throw errors.notFound(key)
      const ops = [{ type: 'del', key: format.metaKey(key) }]
      this.#deleteChunks(ops, key, old)
      await this.#apply(ops, { used: this.used - old.size, files: this.files - 1 })
    })
  }

  // Writes `ops` with the new accounting in one batch, then adopts it.
  async #apply (ops, account) {
    ops.push({ type: 'put', key: format.ACCOUNT, value: JSON.stringify(account) })
    await this.db.batch(ops, { sync: this.sync })
    this.used = account.used
    this.files = account.files
  }

  #deleteChunks (ops, key, meta) {
    for (let i = 0; i < meta.chunks; i++) ops.push({ type: 'del', key: this.chunkKeys.key(key, meta.version, i) })
  }

  // Removes the chunks of an abandoned version and its pending record.
  async discard (key, version) {
    await this.db.clear(this.chunkKeys.range(key, version))
    await this.db.batch([{ type: 'del', key: format.pendingKey(version) }])
  }

  // Discards every pending version not being written by this process: what a crash or
  // a failed cleanup left behind. Reads only the pending records, not stored data. Runs
  // exclusive of commits, which leave `writing` in their own exclusive section.
  discardAbandoned () {
    return this.exclusive(() => this.#discardAbandoned())
  }

  async #discardAbandoned () {
    const abandoned = []
    const it = this.db.iterator({ ...format.pendingRange(), valueAsBuffer: false })
    try {
      for (let entry = await next(it); entry; entry = await next(it)) {
        const version = entry.key.slice(format.PENDING.length)
        if (!this.writing.has(version)) abandoned.push({ key: entry.value, version })
      }
    } finally {
      await end(it)
    }
    for (const { key, version } of abandoned) await this.discard(key, version)
  }

  // Up to `limit` metadata records with keys after `after` (from the start without it).
  async metaPage (after, limit) {
    const range = format.metaRange()
    if (after !== undefined) range.gt = format.metaKey(after)
    const it = this.db.iterator({ ...range, limit, valueAsBuffer: false })
    const page = []
    try {
      for (let entry = await next(it); entry; entry = await next(it)) {
        page.push({ key: entry.key.slice(format.META.length), ...format.decodeMeta(entry.value, `shard ${this.name}`) })
      }
    } finally {
      await end(it)
    }
    return page
  }

  // Exact accounting, and LevelDB's approximate size on disk.
  async figures () {
    const diskBytes = await this.db.approximateSize('!', '\xff').catch(() => 0)
    return { used: this.used, files: this.files, diskBytes }
  }

  async compact () {
    await this.discardAbandoned()
    await this.db.compactRange('!', '\xff')
  }

  close () {
    return this.db.close()
  }
}

function damaged (index, err) {
  return errors.corrupt(`shard ${errors.shardName(index)}`, `${err.message}; kfs repair ${index} may recover it`, { shard: index, cause: err })
}

class Reservation {
  constructor (shard) {
    this.shard = shard
    this.bytes = 0
  }

  add (bytes) {
    const { shard } = this
    if (bytes > shard.cap - shard.used - shard.reserved) throw errors.noSpace(shard.index, bytes, shard.free)
    shard.reserved += bytes
    this.bytes += bytes
  }

  // Gives the claim up. A commit calls it in the tick it adds the file to `used`, so
  // used + reserved never counts the file twice.
  release () {
    this.shard.reserved -= this.bytes
    this.bytes = 0
  }
}

async function createShard (location, tmpDir) {
  // rename() would replace an empty directory: whatever is in the way is not ours to take.
  const inTheWay = await fs.stat(location).then(() => true, () => false)
  if (inTheWay) throw new Error(`${location} exists but this store never created it`)
  const staging = path.join(tmpDir, `${path.basename(location)}-${crypto.randomBytes(4).toString('hex')}`)
  const db = await LevelDb.open(staging, { createIfMissing: true, errorIfExists: true })
  try {
    await db.put(format.ACCOUNT, JSON.stringify({ used: 0, files: 0 }), { sync: true })
  } finally {
    await db.close()
  }
  try {
    await fs.rename(staging, location)
  } catch (err) {
    await fs.rm(staging, { recursive: true, force: true })
    throw err
  }
}

module.exports = { Shard }

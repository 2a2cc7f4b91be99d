'use strict'

const fs = require('node:fs/promises')
const path = require('node:path')
const crypto = require('node:crypto')
const { LevelDb } = require('../leveldb/leveldb')
const { openFailure } = require('../leveldb/classify')
const { shardName } = require('./routing')
const { syncDir } = require('../dir/sync-dir')
const records = require('./records')
const errors = require('../api/errors')

// Removed versions of at least this size are noted for the Reclaimer.
const DEAD_NOTED = 64 * 1024
// Removed versions are compacted away in key ranges holding about this much of them:
// one table file (lib/leveldb.js maxFileSize). LevelDB compacts whole table files, so
// smaller pieces rewrite the same files again: with 8 or 16 MiB pieces, reclaiming
// fell behind a steady writer (0.96 GB left against 0.16 GB) and a write after a
// 512 MiB unlink waited longer, not shorter (perf/node.js, perf/benchmark.js).
const RECLAIM_PIECE = 32 * 1024 * 1024
// A shard holding at most this many files keeps their keys' fingerprints in memory
// (about 30 bytes each: at most 60 MiB for 256 shards).
const MAX_PRINTED = 8192

// One S-bucket: a LevelDB holding chunks, metadata and its own exact accounting.
// Accounting (`used`, `files`) changes only inside the same atomic batch that commits
// or removes a file, so it is exact after any crash.
class Shard {
  constructor ({ index, location, db, cap, chunkKeys, sync, account }) {
    this.index = index
    this.name = shardName(index)
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
    this.dead = 0 // bytes of removed versions whose space no compaction has reclaimed yet
    this.onDead = () => {} // called when `dead` grew
  }

  // How many of the shard's keys share each fingerprint (a key's first 28 bits), or
  // undefined. A commit of a key whose fingerprint is absent is known to create a file,
  // and skips reading its metadata: a trip to LevelDB's thread, which is most of a
  // small file's time. Made by the first commit (a shard opened to be read or listed
  // has no use for it).
  #prints
  #printsMade = false

  // Builds an empty shard in `tmpDir` and renames it into place, so a crash
  // mid-creation never leaves a half-made shard that would later look damaged. A
  // failure here is never damage: the shard did not exist.
  static async create (location, tmpDir) {
    // rename() would replace an empty directory: whatever is in the way is not ours to take.
    const inTheWay = await fs.stat(location).then(() => true, () => false)
    if (inTheWay) throw errors.system(`shard ${path.basename(location)} could not be created`, { code: 'EEXIST', message: `${location} exists but this store never created it` })
    const staging = path.join(tmpDir, `${path.basename(location)}-${crypto.randomBytes(4).toString('hex')}`)
    try {
      // Made here, not by LevelDB, which ignores a failed mkdir and then reports the
      // missing LOCK file as damage.
      await fs.mkdir(staging)
      const db = await LevelDb.open(staging, { createIfMissing: true, errorIfExists: true })
      try {
        await db.put(records.ACCOUNT, JSON.stringify({ used: 0, files: 0 }), { sync: true })
        // Into a table: a shard's first open then replays no log. LevelDB skips a log
        // it cannot open (out of descriptors) and forgets it: the record would be lost.
        await db.flush()
      } finally {
        await db.close()
      }
      // Its entries durable before it is in place. LevelDB 1.20 happens to sync the
      // directory with its manifest, but not after renaming CURRENT or removing a
      // replayed log: a shard must not depend on the order of its work.
      await syncDir(staging)
      await fs.rename(staging, location)
      await syncDir(path.dirname(location)) // a failure here leaves a shard that exists
    } catch (err) {
      await fs.rm(staging, { recursive: true, force: true })
      if (err.code === 'ENOSPC' && !err.disk) throw errors.diskFull(`shard ${path.basename(location)} could not be created`, err.message, { cause: err })
      if (err.code) throw err
      throw errors.system(`shard ${path.basename(location)} could not be created`, { code: 'EIO', message: err.message }, { cause: err })
    }
  }

  // Opens the existing shard at `location`. A shard that LevelDB cannot open is
  // reported as damaged, never recreated. Records that LevelDB dropped from a damaged
  // log while opening are noted in the shard, for verify() to report.
  // unnoted: dropped records an earlier open found and could not note.
  // writeBufferSize: LevelDB's memtable size for this shard.
  static async open ({ index, location, cap, chunkKeys, sync, writeBufferSize, unnoted = [] }) {
    let db
    try {
      db = await LevelDb.open(location, { shard: index, writeBufferSize })
    } catch (err) {
      throw openFailed(index, location, err)
    }
    let dropped = []
    try {
      const raw = await db.get(records.ACCOUNT)
      if (raw === undefined) throw new Error('its accounting record is missing')
      const shard = new Shard({ index, location, db, cap, chunkKeys, sync, account: JSON.parse(raw) })
      shard.dead = await shard.#deadBytes()
      dropped = [...unnoted, ...(await droppedOnRecovery(location))]
      if (dropped.length) await shard.#noteDamage(dropped)
      return shard
    } catch (err) {
      await db.close().catch(() => {})
      const failure = err.code ? err : openFailed(index, location, err) // an OS error is not damage
      if (dropped.length) failure.dropped = dropped
      throw failure
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
  // next to what is stored and what other writes in flight have claimed. sizeKnown:
  // `bytes` is the whole file, not the first of bytes added as they come.
  reserve (bytes, sizeKnown = true) {
    const reservation = new Reservation(this, sizeKnown)
    reservation.add(bytes)
    return reservation
  }

  async getMeta (key) {
    const raw = await this.db.get(records.metaKey(key))
    return raw === undefined ? undefined : records.decodeMeta(raw, this.index, key)
  }

  // The fingerprints of every stored key, or undefined if a metadata record cannot be
  // read (verify() reports that; commits then read metadata as before).
  async #printKeys () {
    const prints = new Map()
    try {
      for await (const entry of this.#scan(records.metaRange(), { values: false })) {
        const print = fingerprint(entry.key.slice(records.META.length))
        prints.set(print, (prints.get(print) || 0) + 1)
      }
    } catch {
      return undefined
    }
    return prints
  }

  // The metadata of the version a commit replaces, without reading it when the key's
  // fingerprint says the shard cannot hold it. Runs in the exclusive section, as every
  // change to the shard's keys does, so the fingerprints made here miss none.
  async #replaced (key) {
    if (!this.#printsMade && this.files <= MAX_PRINTED) {
      this.#printsMade = true
      this.#prints = await this.#printKeys()
    }
    return this.#prints && !this.#prints.has(fingerprint(key)) ? undefined : this.getMeta(key)
  }

  // Keeps the fingerprints exact after a commit created a file (+1) or an unlink removed one (-1).
  #printed (key, change) {
    if (!this.#prints) return
    if (this.files > MAX_PRINTED) {
      this.#prints = undefined
      return
    }
    const print = fingerprint(key)
    const count = (this.#prints.get(print) || 0) + change
    if (count > 0) this.#prints.set(print, count)
    else this.#prints.delete(print)
  }

  // Writes chunk records of an uncommitted version. The first batch of a version also
  // records it as pending, so that a crash before commit can be cleaned up on reopen
  // without scanning the shard. A synced store cannot sync only the commit: LevelDB
  // does not sync a log when it moves on to a new one, so chunks written to an earlier
  // log would not be durable. The writer syncs each batch, or flushes before the
  // commit (ChunkWriter).
  // `chunks` are records (records.newChunkRecord) whose header is sealed here.
  writeChunks (key, version, firstIndex, chunks, { sync }) {
    const ops = []
    if (firstIndex === 0) ops.push({ type: 'put', key: records.pendingKey(version), value: key })
    this.#putChunks(ops, key, version, firstIndex, chunks)
    return this.db.batch(ops, { sync })
  }

  #putChunks (ops, key, version, firstIndex, chunks) {
    chunks.forEach((record, i) => {
      const chunkKey = this.chunkKeys.key(key, version, firstIndex + i)
      ops.push({ type: 'put', key: chunkKey, value: records.sealChunk(chunkKey, record) })
    })
  }

  // Makes `meta` the visible version of its key in one atomic batch: metadata, the
  // removal of the previous version's chunks and of the pending record, and the new
  // accounting. `inline`: the file's chunks, when they were not written before (a file
  // that fits in one batch has no pending record). Consumes the reservation.
  // `cancelled()` is asked once the commit's turn comes: a write destroyed while
  // waiting for it is not committed.
  commit (meta, reservation, cancelled = () => false, inline = []) {
    return this.exclusive(async () => {
      if (cancelled()) throw errors.cancelled(meta.key)
      const old = await this.#replaced(meta.key)
      const ops = []
      this.#putChunks(ops, meta.key, meta.version, 0, inline)
      ops.push({ type: 'put', key: records.metaKey(meta.key), value: records.encodeMeta(meta) })
      if (meta.chunks > inline.length) ops.push({ type: 'del', key: records.pendingKey(meta.version) })
      if (old) this.#deleteChunks(ops, meta.key, old)
      await this.#apply(ops, { used: this.used - (old ? old.size : 0) + meta.size, files: this.files + (old ? 0 : 1) })
      if (old) this.#died(old)
      else this.#printed(meta.key, 1)
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
      const ops = [{ type: 'del', key: records.metaKey(key) }]
      this.#deleteChunks(ops, key, old)
      await this.#apply(ops, { used: this.used - old.size, files: this.files - 1 })
      this.#died(old)
      this.#printed(key, -1)
    })
  }

  // Writes `ops` with the new accounting in one batch, then adopts it.
  async #apply (ops, account) {
    ops.push({ type: 'put', key: records.ACCOUNT, value: JSON.stringify(account) })
    await this.db.batch(ops, { sync: this.sync })
    this.used = account.used
    this.files = account.files
  }

  // Deletes a version's chunks, and notes the version as dead: LevelDB keeps deleted
  // data on disk until a compaction passes over it, and a shard sees too few writes for
  // its own compactions to come soon. The note is kept until the Reclaimer compacted
  // its range. Small versions are not noted: their space is small and comes back with
  // the shard's own compactions.
  #deleteChunks (ops, key, meta) {
    for (let i = 0; i < meta.chunks; i++) ops.push({ type: 'del', key: this.chunkKeys.key(key, meta.version, i) })
    if (meta.size >= DEAD_NOTED) ops.push({ type: 'put', key: records.deadKey(key, meta.version), value: String(meta.size) })
  }

  #died (meta) {
    if (meta.size < DEAD_NOTED) return
    this.dead += meta.size
    this.onDead(this)
  }

  async #deadVersions () {
    const dead = []
    for await (const entry of this.#scan(records.deadRange())) {
      dead.push({ id: entry.key, prefix: entry.key.slice(records.DEAD.length), bytes: Number(entry.value) || 0 })
    }
    return dead
  }

  async #deadBytes () {
    return (await this.#deadVersions()).reduce((sum, d) => sum + d.bytes, 0)
  }

  // What reclaiming the dead versions noted so far takes: key ranges to compact, each
  // holding about RECLAIM_PIECE bytes of them (a large version in several pieces, small
  // neighbours together), so that no single compaction holds LevelDB's one background
  // thread for long; then forgetDead(plan) removes the notes. A crash midway leaves the
  // notes: the next plan does it again.
  async reclaimPlan () {
    const dead = await this.#deadVersions()
    const pieces = []
    let group
    for (const { prefix, bytes } of dead) {
      if (bytes > RECLAIM_PIECE) {
        if (group) pieces.push(group)
        group = undefined
        const [key, version] = prefix.split(' ')
        const chunks = Math.ceil(bytes / this.chunkKeys.chunkSize)
        const step = Math.max(1, Math.floor(RECLAIM_PIECE / this.chunkKeys.chunkSize))
        for (let i = 0; i < chunks; i += step) {
          pieces.push({ from: this.chunkKeys.key(key, version, i), to: this.chunkKeys.key(key, version, Math.min(chunks, i + step) - 1) })
        }
      } else if (group && group.bytes + bytes <= RECLAIM_PIECE) {
        group.to = `${prefix} ~`
        group.bytes += bytes
      } else {
        if (group) pieces.push(group)
        group = { from: `${prefix} `, to: `${prefix} ~`, bytes }
      }
    }
    if (group) pieces.push(group)
    return { pieces: pieces.map(({ from, to }) => ({ from, to })), ids: dead.map((d) => d.id), bytes: dead.reduce((sum, d) => sum + d.bytes, 0) }
  }

  compactPiece ({ from, to }) {
    return this.db.compactRange(from, to)
  }

  forgetDead ({ ids }) {
    return this.#forget(ids.map((id) => ({ type: 'del', key: id })))
  }

  // Deletes dead notes (`ops`), then makes `dead` the sum of the notes left. The
  // Reclaimer and compact() may forget the same notes, on one shard at once, while
  // removals note new ones: subtracting what each meant to forget would count bytes
  // twice, or drop a note made meanwhile, and its space would not come back. Exclusive
  // of commits and unlinks, which note removals and add to `dead` in one section.
  #forget (ops) {
    return this.exclusive(async () => {
      if (ops.length) await this.db.batch(ops)
      this.dead = await this.#deadBytes()
    })
  }

  // Removes the chunks of an abandoned version and its pending record.
  async discard (key, version) {
    await this.db.clear(this.chunkKeys.range(key, version))
    await this.db.batch([{ type: 'del', key: records.pendingKey(version) }])
  }

  // Discards every pending version not being written by this process: what a crash or
  // a failed cleanup left behind. Reads only the pending records, not stored data. Runs
  // exclusive of commits, which leave `writing` in their own exclusive section.
  discardAbandoned () {
    return this.exclusive(async () => {
      for (const { key, version } of await this.#pending()) {
        if (!this.writing.has(version)) await this.discard(key, version)
      }
    })
  }

  async #pending () {
    const pending = []
    for await (const entry of this.#scan(records.pendingRange())) {
      pending.push({ key: entry.value, version: entry.key.slice(records.PENDING.length) })
    }
    return pending
  }

  #scan (range, options = {}) {
    return this.db.scan({ ...range, valueAsBuffer: false, ...options })
  }

  // Up to `limit` metadata records with keys after `after` (from the start without it).
  // A record that cannot be decoded comes as { key, error } and does not hide the rest.
  async metaPage (after, limit) {
    const range = records.metaRange()
    if (after !== undefined) range.gt = records.metaKey(after)
    const page = []
    for await (const entry of this.#scan(range, { limit })) {
      const key = entry.key.slice(records.META.length)
      try {
        page.push(records.decodeMeta(entry.value, this.index, key))
      } catch (error) {
        page.push({ key, error })
      }
    }
    return page
  }

  // What LevelDB dropped from damaged logs when this shard was opened, as noted then:
  // [{ at, dropped: [lines of LevelDB's LOG], pending: [keys whose writes were cut] }].
  async damageNotes () {
    const notes = []
    for await (const entry of this.#scan(records.damageRange())) notes.push({ id: entry.key, ...records.decodeNote(entry.value) })
    return notes
  }

  // Writes in flight when the log was damaged may have lost their commit: their keys
  // are noted with the damage before discardAbandoned() removes their chunks.
  async #noteDamage (dropped) {
    const pending = [...new Set((await this.#pending()).map((p) => p.key))]
    const at = Date.now()
    await this.db.put(records.damageKey(at), JSON.stringify({ at: new Date(at).toISOString(), dropped, pending }), { sync: true })
  }

  // Exact accounting, and LevelDB's approximate size on disk.
  async figures () {
    const diskBytes = await this.db.approximateSize('!', '\xff').catch(() => 0)
    return { used: this.used, files: this.files, diskBytes }
  }

  // LevelDB 1.20's CompactRange reports no error: a compaction that failed (a full
  // disk) leaves the database refusing writes. A delete of a key that never exists
  // finds that out, so the shard is reopened when it is next released.
  async compact () {
    await this.discardAbandoned()
    const dead = await this.#deadVersions()
    await this.db.compactRange('!', '\xff')
    // Also the probe: a delete of a key that never exists.
    await this.#forget([...dead.map(({ id }) => ({ type: 'del', key: id })), { type: 'del', key: records.ACCOUNT + '~probe' }])
  }

  // Flushes the memtable first, so reopening replays no log: a closed shard then
  // reopens quickly, and on a full disk with a few kilobytes. A shard only read from
  // has nothing to flush (and flushing would still write a manifest).
  async close () {
    if (this.db.written && !this.db.failed) await this.db.flush().catch(() => {})
    await this.db.close()
  }
}

// Keys are hex: their first 7 digits make a small integer (V8 keeps it unboxed).
function fingerprint (key) {
  return parseInt(key.slice(0, 7), 16)
}

function openFailed (index, location, err) {
  const name = `shard ${shardName(index)}`
  return openFailure(err, { dir: location, what: name, damaged: name, hint: `kfs repair ${index} may recover it`, props: { shard: index } })
}

// LevelDB drops a log record that fails its checksum while opening, and says so only in
// the database's LOG file, which each open starts afresh.
async function droppedOnRecovery (location) {
  const log = await fs.readFile(path.join(location, 'LOG'), 'utf8').catch(() => '')
  return log.split('\n').filter((line) => /: dropping \d+ bytes; /.test(line)).map((line) => line.replace(/^\S+ \S+ /, ''))
}

// The space one write claims in its shard: the file's size when it was announced, else
// what has come so far.
class Reservation {
  constructor (shard, sizeKnown) {
    this.shard = shard
    this.bytes = 0
    this.sizeKnown = sizeKnown
    // What ENOSPC reports: the room there was for this file, not what is left once
    // part of it was claimed.
    this.freeAtStart = shard.free
  }

  add (bytes) {
    const { shard } = this
    if (bytes > shard.cap - shard.used - shard.reserved) throw errors.noSpace(shard.index, this.bytes + bytes, this.freeAtStart, this.sizeKnown)
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

module.exports = { Shard }

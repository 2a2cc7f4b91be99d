'use strict'

const { LevelDb, madeNotDurable } = require('../leveldb/leveldb')
const { openFailure } = require('../leveldb/classify')
const { shardName } = require('../base/shard-names')
const records = require('./records')
const chunkRecord = require('./chunk-record')
const { encodeHead } = require('./head-record')
const { upgradeHeads } = require('./head-upgrade')
const scans = require('./scans')
const { Reservation } = require('./reservation')
const { Fingerprints } = require('./fingerprints')
const { planReclaim } = require('./reclaim-plan')
const errors = require('../api/errors')
const { free } = require('../base/freed')
const { Lifecycle } = require('../api/lifecycle')

// Reclaiming compacts a key range once its removed versions are at least this share of
// the bytes its table files hold: compacting rewrites the live files in the range too,
// up to 3 bytes per byte given back, and a range with fewer dead bytes waits for more
// removals (or compact()).
const RECLAIM_SHARE = 0.25
const NO_BYTES = Buffer.alloc(0)

// One S-bucket: a LevelDB holding chunks, metadata and its own exact accounting.
// Accounting (`used`, `files`) changes only inside the same atomic batch that commits
// or removes a file, so it is exact after any crash.
class Shard {
  #memtables

  constructor ({ index, location, db, cap, chunkKeys, sync, memtables, account }) {
    this.#memtables = memtables
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
    this.deferred = 0 // of which the notes the last plan left for later (RECLAIM_SHARE)
    this.compacting = 0 // compactions of its key ranges in flight
    this.onDead = () => {} // called when `dead` grew
    this.allHeads = false // every file has a head record (records.HEADS): nothing to upgrade
  }

  #waiting = new Set() // the ids of the notes the last plan left for later
  #forgets = 0 // notes forgotten so far (#forget): a plan that scanned before one defers nothing

  // Fingerprints of the shard's keys: a commit of a key the shard is known not to hold
  // skips reading its metadata (fingerprints.js).
  #prints = new Fingerprints()
  #life = new Lifecycle('open')

  // Opens the existing shard at `location`. A shard that LevelDB cannot open is
  // reported as damaged, never recreated. Records that LevelDB dropped from a damaged
  // log while opening are noted in the shard, for verify() to report.
  // unnoted: dropped records an earlier open found and could not note.
  // memtables: the store's (memtables.js), which counts this shard's memory while it is
  // open. readOnly: see LevelDb.open.
  // created: made by this process just now (create.js): its files are known, so it holds
  // no dead versions, no keys, and its only log was empty; nothing is read to find out.
  static async open ({ index, location, cap, chunkKeys, sync, memtables = UNBOUNDED, readOnly, unnoted = [], created = false }) {
    let db
    try {
      db = await LevelDb.open(location, { shard: index, readOnly })
    } catch (err) {
      throw openFailed(index, location, err)
    }
    let dropped = []
    try {
      // At once: each is a call on libuv's threads, and a store just opened opens many
      // shards. A shard made by format 3 holds the HEADS mark from the start: nothing to
      // upgrade.
      const [raw, heads, dead, recovered] = await settled([
        db.get(records.ACCOUNT),
        created || db.get(records.HEADS),
        created ? 0 : deadBytes(db),
        created ? [] : db.droppedOnRecovery()
      ])
      dropped = [...unnoted, ...recovered]
      if (raw === undefined) throw new Error('its accounting record is missing')
      const shard = new Shard({ index, location, db, cap, chunkKeys, sync, memtables, account: JSON.parse(raw) })
      shard.allHeads = heads !== undefined
      shard.dead = dead
      if (created) shard.#prints.made()
      if (dropped.length) await shard.#noteDamage(dropped)
      memtables.add(shard)
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

  // The metadata of the version a commit replaces, without reading it when the key's
  // fingerprint says the shard cannot hold it. Runs in the exclusive section, as every
  // change to the shard's keys does, so the fingerprints made here miss none.
  async #replaced (key) {
    return (await this.#prints.mayHold(key, this.files, () => this.#storedKeys())) ? this.getMeta(key) : undefined
  }

  #storedKeys () {
    return scans.storedKeys(this.db)
  }

  // Writes chunk records of an uncommitted version. The first batch of a version also
  // records it as pending, so that a crash before commit can be cleaned up on reopen
  // without scanning the shard. A synced store cannot sync only the commit: LevelDB
  // does not sync a log when it moves on to a new one, so chunks written to an earlier
  // log would not be durable. The writer syncs each batch, or flushes before the
  // commit (ChunkWriter).
  // `chunks` are records (chunk-record.js) whose header is sealed here.
  writeChunks (key, version, firstIndex, chunks, { sync }) {
    const ops = []
    if (firstIndex === 0) ops.push({ type: 'put', key: records.pendingKey(version), value: key })
    this.#putChunks(ops, key, version, firstIndex, chunks)
    // A batch made but perhaps not durable fails the write like any other failure: it is
    // never committed.
    return this.#write(ops, sync)
  }

  // undefined, or a promise to await before writeChunks(): the store's memtables are
  // over its memory budget and a flush is in flight (memtables.js). writeChunks() itself
  // never waits, so that the records it is given are sent before the caller reuses them.
  room () {
    return this.#memtables.wait()
  }

  // A batch, counted in the store's memtables once written. Sent at once, in this turn
  // of the event loop (LevelDb#batch copies what it is given before it returns).
  #write (ops, sync) {
    this.#memtables.begin(this)
    const written = this.db.batch(ops, { sync })
    written.then(() => this.#memtables.wrote(this, true), (err) => this.#memtables.wrote(this, madeNotDurable(err)))
    return written
  }

  #putChunks (ops, key, version, firstIndex, chunks) {
    chunks.forEach((record, i) => {
      const chunkKey = this.chunkKeys.key(key, version, firstIndex + i)
      ops.push({ type: 'put', key: chunkKey, value: chunkRecord.seal(chunkKey, record) })
    })
  }

  // Makes `meta` the visible version of its key in one atomic batch: metadata, the
  // removal of the previous version's chunks and of the pending record, and the new
  // accounting. `inline`: the file's chunks, when they were not written before (a file
  // that fits in one batch has no pending record). Consumes the reservation.
  // `cancelled()` is asked once the commit's turn comes, and the store's memtables
  // have room (room()): a write destroyed while waiting for either is not committed.
  // `sync`: synced, as every commit is in a synced store.
  commit (meta, reservation, cancelled = () => false, inline = [], { sync = false } = {}) {
    return this.exclusive(async () => {
      await this.room()
      if (cancelled()) throw errors.cancelled(meta.key)
      const old = this.#prints.lacks(meta.key) ? undefined : await this.#replaced(meta.key)
      const ops = []
      // The data of a file of at most one chunk written in its commit goes in its head.
      meta.inline = inline.length === meta.chunks && meta.chunks <= 1
      const data = !meta.inline ? undefined : inline.length ? chunkRecord.payload(inline[0]) : NO_BYTES
      const head = encodeHead(meta.key, meta, data)
      if (!meta.inline) this.#putChunks(ops, meta.key, meta.version, 0, inline)
      ops.push({ type: 'put', key: meta.key, value: head })
      ops.push({ type: 'put', key: records.metaKey(meta.key), value: records.encodeMeta(meta) })
      if (meta.chunks > inline.length) ops.push({ type: 'del', key: records.pendingKey(meta.version) })
      if (old) this.#deleteChunks(ops, meta.key, old)
      let notDurable
      try {
        notDurable = await this.#apply(ops, { used: this.used - (old ? old.size : 0) + meta.size, files: this.files + (old ? 0 : 1) }, sync)
      } finally {
        // A small file's whole data, which the binding copied: given back now rather
        // than at V8's next collection, which lets tens of MiB of them pile up in the
        // main thread's malloc arena (doc/about.md, "Memory").
        free(head)
      }
      if (old) this.#died(old)
      else this.#prints.added(meta.key, this.files)
      reservation.release()
      // Inside the exclusive section: discardAbandoned(), which runs there too, can
      // never see this version as pending and no longer being written.
      this.writing.delete(meta.version)
      if (notDurable) throw notDurable
    })
  }

  unlink (key, { sync = false } = {}) {
    return this.exclusive(async () => {
      await this.room()
      const old = await this.getMeta(key)
      // A head left without its metadata (damage) is the file a read finds: removed, its
      // space noted for reclaiming as a removed version's.
      const head = old ? undefined : await this.db.get(key)
      if (head !== undefined) {
        const gone = { size: head.length }
        await this.#write([{ type: 'del', key }, { type: 'put', key: records.deadKey(key, head.toString('hex', 8, 16)), value: String(gone.size) }], this.sync || sync)
        return this.#died(gone)
      }
      if (!old) throw errors.notFound(key)
      const ops = [{ type: 'del', key: records.metaKey(key) }]
      if (old.format !== undefined) ops.push({ type: 'del', key })
      this.#deleteChunks(ops, key, old)
      const notDurable = await this.#apply(ops, { used: this.used - old.size, files: this.files - 1 }, sync)
      this.#died(old)
      this.#prints.removed(key, this.files)
      if (notDurable) throw notDurable
    })
  }

  // Writes `ops` with the new accounting in one batch, then adopts it. Resolves to the
  // error of a batch that was made but may not be durable (madeNotDurable), with
  // `written`, which the caller throws once it has taken the write as made.
  async #apply (ops, account, sync) {
    ops.push({ type: 'put', key: records.ACCOUNT, value: JSON.stringify(account) })
    let notDurable
    try {
      await this.#write(ops, this.sync || sync)
    } catch (err) {
      if (!madeNotDurable(err)) throw err
      notDurable = errors.system(`shard ${this.name}`, { code: err.code, message: `it was made and is visible, but may not survive a power cut: its directory could not be synced (${err.cause.message})` }, { shard: this.index, written: true, cause: err })
    }
    this.used = account.used
    this.files = account.files
    return notDurable
  }

  // Deletes a version's chunks, and notes the version as dead, whatever its size:
  // LevelDB keeps deleted data on disk until a compaction passes over it, and a shard
  // sees too few writes for its own compactions to come soon. The note is kept until
  // the Reclaimer compacted its range.
  #deleteChunks (ops, key, meta) {
    if (!meta.inline) for (let i = 0; i < meta.chunks; i++) ops.push({ type: 'del', key: this.chunkKeys.key(key, meta.version, i) })
    if (meta.size > 0) ops.push({ type: 'put', key: records.deadKey(key, meta.version), value: String(meta.size) })
  }

  // A removal's bytes are reclaimable; what the last plan left for later stays
  // deferred. The next plan of this shard weighs every range again, the deferred ones
  // too, and the Reclaimer plans a shard for its new dead bytes only: under steady
  // removals, a shard whose ranges stay below RECLAIM_SHARE is not planned again for
  // every removal.
  #died (meta) {
    if (meta.size === 0) return
    this.dead += meta.size
    this.onDead(this)
  }

  // Dead bytes the Reclaimer may give back now: those in ranges the last plan left for
  // later wait until removals since make the shard worth planning again.
  get reclaimable () {
    return this.dead - this.deferred
  }

  #deadVersions () {
    return scans.deadVersions(this.db)
  }

  // What reclaiming the dead versions noted so far takes: { pieces: [{ from, to,
  // tables }], ids, bytes }, the key ranges to compact (reclaim-plan.js) whose dead
  // versions are at least RECLAIM_SHARE of `tables`, the bytes of the table files in
  // the range, and those versions' notes; the others are left for later (`deferred`).
  // Then forgetDead(plan) removes the notes. A crash midway leaves the notes: the next
  // plan does it again.
  async reclaimPlan () {
    const forgets = this.#forgets
    const dead = await this.#deadVersions()
    const pieces = []
    const skipped = new Set()
    const shardBytes = await this.db.approximateSize(records.WHOLE.from, records.WHOLE.to) + this.db.memoryUsage()
    for (const piece of planReclaim(dead, this.chunkKeys, shardBytes)) {
      // Data still in the memtable is in no table: a range of a larger shard holding
      // only such data is compacted.
      piece.tables ??= await this.db.approximateSize(piece.from, piece.to)
      if (piece.bytes >= RECLAIM_SHARE * piece.tables) pieces.push(piece)
      else piece.ids.forEach((id) => skipped.add(id))
    }
    const ids = new Set(pieces.flatMap((piece) => piece.ids).filter((id) => !skipped.has(id)))
    const bytes = dead.reduce((sum, d) => sum + (ids.has(d.id) ? d.bytes : 0), 0)
    // The notes weighed and left; removals noted since the scan stay reclaimable. Notes
    // forgotten since the scan (compact()) make the scan stale: nothing is deferred then,
    // and the shard is planned again.
    const stale = forgets !== this.#forgets
    this.#leave(dead, (id) => !stale && !ids.has(id))
    return { pieces: pieces.map(({ from, to, tables }) => ({ from, to, tables })), ids: [...ids], bytes }
  }

  compactPiece ({ from, to }) {
    return this.#compactRange(from, to)
  }

  forgetDead ({ ids }) {
    return this.#forget(ids.map((id) => ({ type: 'del', key: id })))
  }

  // Deletes dead notes (`ops`), then makes `dead` the sum of the notes left, and
  // `deferred` that of those left that the last plan left for later. The Reclaimer and
  // compact() may forget the same notes, on one shard at once, while removals note new
  // ones: subtracting what each meant to forget would count bytes twice, or drop a note
  // made meanwhile, and its space would not come back. Exclusive of commits and
  // unlinks, which note removals and add to `dead` in one section.
  #forget (ops) {
    return this.exclusive(async () => {
      if (ops.length) await this.db.batch(ops)
      this.#forgets++
      const left = await this.#deadVersions()
      this.dead = left.reduce((sum, d) => sum + d.bytes, 0)
      this.#leave(left, (id) => this.#waiting.has(id))
    })
  }

  // Of `notes` (dead notes scanned), those whose id `waits` are left for later:
  // `deferred` is their bytes.
  #leave (notes, waits) {
    this.#waiting = new Set(notes.filter((d) => waits(d.id)).map((d) => d.id))
    this.deferred = notes.reduce((sum, d) => sum + (this.#waiting.has(d.id) ? d.bytes : 0), 0)
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
      for (const { key, version } of await scans.pendingVersions(this.db)) {
        if (!this.writing.has(version)) await this.discard(key, version)
      }
    })
  }

  // Gives every file of format 2 a head record, in the background of an open shard
  // (head-upgrade.js). `room(bytes)`: whether the disk has room for a batch's bytes
  // besides the disk reserve. Never rejects; the shard's close waits for it.
  upgradeHeads ({ room = async () => true } = {}) {
    if (!this.#upgrading && !this.allHeads && !this.db.readOnly) {
      this.#upgrading = upgradeHeads(this, { room, write: (ops) => this.#write(ops, this.sync), died: (meta) => this.#died(meta) })
    }
    return this.#upgrading
  }

  #upgrading // upgradeHeads() under way, or done

  // Up to `limit` metadata records with keys after `after` (scans.js).
  metaPage (after, limit) {
    return scans.metaPage(this.db, this.index, after, limit)
  }

  // What LevelDB dropped from damaged logs when this shard was opened, as noted then
  // (scans.js), and by this open if it is read-only.
  async damageNotes () {
    return [...(await scans.damageNotes(this.db)), ...this.#unsaved]
  }

  #unsaved = [] // the damage note of a read-only open, which cannot write it

  // Writes in flight when the log was damaged may have lost their commit: their keys
  // are noted with the damage before discardAbandoned() removes their chunks.
  async #noteDamage (dropped) {
    const pending = [...new Set((await scans.pendingVersions(this.db)).map((p) => p.key))]
    const at = new Date()
    const note = { at: at.toISOString(), dropped, pending }
    if (this.db.readOnly) this.#unsaved.push(note)
    // Made, even if perhaps not durably: noting it again at the next open would name the
    // damage twice.
    else await this.db.put(records.damageKey(at.getTime()), JSON.stringify(note), { sync: true }).catch((err) => { if (!madeNotDurable(err)) throw err })
  }

  // Exact accounting, and LevelDB's approximate size on disk.
  async figures () {
    const diskBytes = await this.db.approximateSize(records.WHOLE.from, records.WHOLE.to).catch(() => 0)
    return { used: this.used, files: this.files, diskBytes }
  }

  // LevelDB 1.20's CompactRange reports no error: a compaction that failed (a full
  // disk) leaves the database refusing writes. A delete of a key that never exists
  // finds that out, so the shard is reopened when it is next released.
  async compact () {
    await this.discardAbandoned()
    const dead = await this.#deadVersions()
    await this.#compactRange(records.WHOLE.from, records.WHOLE.to)
    // Also the probe: a delete of a key that never exists.
    await this.#forget([...dead.map(({ id }) => ({ type: 'del', key: id })), { type: 'del', key: records.ACCOUNT + '~probe' }])
  }

  async #compactRange (from, to) {
    this.compacting++
    try {
      await this.db.compactRange(from, to)
    } finally {
      this.compacting--
    }
  }

  get status () {
    return this.#life.status
  }

  // Every caller's promise settles once the database is closed, to the shard's figures
  // as it closed (those of figures(), its memtable written out). The store's memtables
  // count the shard's memory until then: LevelDB frees it only once closed.
  close () {
    return this.#life.close(() => {
      const closed = this.#flushAndClose()
      this.#memtables.closing(this, closed)
      return closed
    })
  }

  // Flushes the memtable first, so reopening replays no log: a closed shard then
  // reopens quickly, and on a full disk with a few kilobytes. A shard only read from
  // has nothing to flush (and flushing would still write a manifest).
  async #flushAndClose () {
    await this.#upgrading // stops at its next page
    if (this.db.written && !this.db.failed) await this.db.flush().catch(() => {})
    const figures = await this.figures()
    await this.db.close()
    return figures
  }
}

async function deadBytes (db) {
  return (await scans.deadVersions(db)).reduce((sum, d) => sum + d.bytes, 0)
}

// The values of `promises` once all settled, or the first failure among them: none is
// left in flight when the caller closes the database on a failure.
async function settled (promises) {
  const results = await Promise.allSettled(promises)
  const failed = results.find((r) => r.status === 'rejected')
  if (failed) throw failed.reason
  return results.map((r) => r.value)
}

// A shard opened alone, outside a store: nothing bounds its memtables but LevelDB.
const UNBOUNDED = { add () {}, closing () {}, wait () {}, begin () {}, wrote () {} }

function openFailed (index, location, err) {
  const name = `shard ${shardName(index)}`
  return openFailure(err, { dir: location, what: name, damaged: name, hint: `kfs repair ${index} may recover it`, props: { shard: index } })
}

module.exports = { Shard }

'use strict'

const { madeNotDurable } = require('../leveldb/leveldb')
const { shardName } = require('../base/shard-names')
const records = require('./records')
const { putChunks, commitOps } = require('./batches')
const { TrashCount } = require('./trash-count')
const { Removals } = require('./removals')
const { DiskBytes } = require('./disk-bytes')
const { upgradeHeads } = require('./head-upgrade')
const scans = require('./scans')
const { Reservation } = require('./reservation')
const { Fingerprints } = require('./fingerprints')
const { DeadSpace } = require('./dead-space')
const { openShard } = require('./open-shard')
const errors = require('../api/errors')
const { free } = require('../base/freed')
const { Lifecycle } = require('../api/lifecycle')

// A shard opened outside a store: no restore made, no trash emptied by itself.
const NO_CLOCK = Object.freeze({ restoredAt: 0, trashMs: Infinity })

// One S-bucket: a LevelDB holding chunks, metadata and its own accounting (`used`, `files`),
// which changes only inside the atomic batch that commits or removes a file: exact after a crash.
class Shard {
  #memtables
  #deadSpace
  #prints = new Fingerprints() // a commit of a key the shard cannot hold reads no metadata
  #life = new Lifecycle('open')
  #upgrading // upgradeHeads() under way, or done
  #unsaved // the damage note of a read-only open, which cannot write it
  #disk // DiskBytes
  #trash // TrashCount
  #removals

  constructor ({ index, location, db, cap, chunkKeys, sync, memtables, account, dead = 0, created = false, allHeads = false, unsaved = [], nextExpiry, clock = NO_CLOCK, trash }) {
    this.#memtables = memtables
    this.#deadSpace = new DeadSpace(this, dead)
    this.#unsaved = unsaved
    if (created) this.#prints.made()
    this.index = index
    this.name = shardName(index)
    this.location = location
    this.db = db
    this.#disk = new DiskBytes(db)
    this.cap = cap
    this.chunkKeys = chunkKeys
    this.sync = sync
    this.used = account.used
    this.files = account.files
    this.reserved = 0
    this.writing = new Set() // versions being written by this process right now
    this.tail = Promise.resolve()
    this.onDead = () => {} // called when `dead` grew
    this.nextExpiry = nextExpiry // the earliest time in its expiry index, or undefined
    this.onExpiry = () => {} // called when nextExpiry came sooner
    this.allHeads = allHeads // every file has a head record (records.HEADS): nothing to upgrade
    this.#trash = new TrashCount(clock, trash)
    this.#removals = new Removals(this, { write: (ops, sync) => this.#write(ops, sync), apply: (ops, account, sync) => this.#apply(ops, account, sync), deadSpace: this.#deadSpace, prints: this.#prints, trash: this.#trash })
  }

  // The store's last restore time: a file trashed at or before it is not in the trash.
  get restoredAt () {
    return this.#trash.restoredAt
  }

  // The files in the trash: { files, bytes, first } (trash-count.js).
  trashFigures () {
    return this.#trash.figures()
  }

  // The earliest time the collector has work here: an expiry, or trash turning trashMs old.
  get nextDue () {
    return this.#trash.dueWith(this.nextExpiry)
  }

  static open (options) {
    return openShard(options, (fields) => new Shard(fields))
  }

  // Runs fn alone among the shard's commits: "last commit wins" and the accounting hold.
  exclusive (fn) {
    const run = this.tail.then(fn)
    this.tail = run.catch(() => {})
    return run
  }

  get free () {
    return Math.max(0, this.cap - this.used - this.reserved)
  }

  // Claims space for bytes about to be written, next to what other writes claimed, or ENOSPC.
  // sizeKnown: `bytes` is the whole file, not the first of bytes added as they come.
  reserve (bytes, sizeKnown = true) {
    const reservation = new Reservation(this, sizeKnown)
    reservation.add(bytes)
    return reservation
  }

  async getMeta (key) {
    const raw = await this.db.get(records.metaKey(key))
    return raw === undefined ? undefined : records.decodeMeta(raw, this.index, key)
  }

  // The metadata of the version readers see at `now`: none once it has expired, or while
  // it is in the trash.
  async getLiveMeta (key, now = Date.now()) {
    const meta = await this.getMeta(key)
    return meta && !records.gone(meta, now, this.restoredAt) ? meta : undefined
  }

  // In the exclusive section, as every change to the shard's keys: the fingerprints miss none.
  async #replaced (key) {
    return (await this.#prints.mayHold(key, this.files, () => scans.storedKeys(this.db))) ? this.getMeta(key) : undefined
  }

  // Writes chunk records of an uncommitted version; its first batch records it as pending, so
  // that a crash before its commit is cleaned up on reopen without a scan. A synced store
  // cannot sync only the commit (LevelDB does not sync a log when it moves on to a new one):
  // the writer syncs each batch, or flushes before the commit (ChunkWriter).
  writeChunks (key, version, firstIndex, chunks, { sync }) {
    const ops = []
    if (firstIndex === 0) ops.push({ type: 'put', key: records.pendingKey(version), value: key })
    putChunks(ops, this.chunkKeys, key, version, firstIndex, chunks)
    return this.#write(ops, sync)
  }

  // Awaited before writeChunks(), which never waits itself, so that the records it is given are
  // sent before the caller reuses them (memtables.js: wait).
  room () {
    return this.#memtables.wait()
  }

  // Sent in this turn of the event loop: LevelDb#batch copies what it is given.
  #write (ops, sync) {
    this.#memtables.begin(this)
    const written = this.db.batch(ops, { sync })
    written.then(() => this.#memtables.wrote(this, true), (err) => this.#memtables.wrote(this, madeNotDurable(err)))
    return written
  }

  // Makes `meta` the visible version of its key in one atomic batch with the new accounting;
  // consumes the reservation. `cancelled()` is asked once the commit's turn comes and the
  // memtables have room: a write destroyed while waiting for either is not committed.
  commit (meta, reservation, cancelled = () => false, inline = [], { sync = false } = {}) {
    return this.exclusive(async () => {
      await this.room()
      if (cancelled()) throw errors.cancelled(meta.key)
      const old = this.#prints.lacks(meta.key) ? undefined : await this.#replaced(meta.key)
      const { ops, head } = commitOps(this.chunkKeys, meta, inline, old)
      let notDurable
      try {
        notDurable = await this.#apply(ops, { used: this.used - (old ? old.size : 0) + meta.size, files: this.files + (old ? 0 : 1) }, sync)
      } finally {
        // A small file's data, which the binding copied: given back before V8's next collection
        // lets tens of MiB pile up in malloc's arena (doc/about.md, "Memory").
        free(head)
      }
      if (old) {
        this.#deadSpace.died(old.size)
        this.#trash.removed(old)
      } else this.#prints.added(meta.key, this.files)
      await this.#removals.expiryCommitted(meta, old)
      reservation.release()
      // Here: discardAbandoned() never sees the version pending and no longer being written.
      this.writing.delete(meta.version)
      if (notDurable) throw notDurable
    })
  }

  unlink (key, options) {
    return this.#removals.unlink(key, options)
  }

  trash (key, time, options) {
    return this.#removals.trash(key, time, options)
  }

  collectExpired (now, limit) {
    return this.#removals.collectExpired(now, limit)
  }

  emptyTrash (restoredAt, before, limit) {
    return this.#removals.emptyTrash(restoredAt, before, limit)
  }

  // Writes `ops` with the new accounting, then adopts it. Resolves to the error of a batch made
  // that may not be durable, with `written`, for the caller to throw once it took it as made.
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

  get dead () {
    return this.#deadSpace.bytes
  }

  get reclaimable () {
    return this.#deadSpace.reclaimable
  }

  get deferred () {
    return this.#deadSpace.deferred
  }

  get compacting () {
    return this.#deadSpace.compacting
  }

  // The Reclaimer's steps (dead-space.js).
  reclaimPlan () {
    return this.#deadSpace.plan()
  }

  compactPiece ({ from, to }) {
    return this.#deadSpace.compactRange(from, to)
  }

  forgetDead ({ ids }) {
    return this.#deadSpace.forget(ids.map((id) => ({ type: 'del', key: id })))
  }

  // A version written but never committed (chunk-writer.js).
  discard (key, version) {
    return this.#removals.discard(key, version)
  }

  discardAbandoned () {
    return this.#removals.discardAbandoned()
  }

  // In the background (head-upgrade.js); never rejects, and the shard's close waits for it.
  upgradeHeads ({ room = async () => true } = {}) {
    if (!this.#upgrading && !this.allHeads && !this.db.readOnly) {
      this.#upgrading = upgradeHeads(this, { room, write: (ops) => this.#write(ops, this.sync), died: (meta) => this.#deadSpace.died(meta.size) })
    }
    return this.#upgrading
  }

  metaPage (after, limit) {
    return scans.metaPage(this.db, this.index, after, limit)
  }

  async damageNotes () {
    return [...(await scans.damageNotes(this.db)), ...this.#unsaved]
  }

  // The shard's figures; `disk`: how new its disk bytes must be (disk-bytes.js).
  async figures (disk) {
    const diskBytes = await this.#disk.read(disk)
    return { used: this.used, files: this.files, diskBytes, dead: this.dead, nextExpiry: this.nextExpiry, trash: { ...this.trashFigures() } }
  }

  // LevelDB's CompactRange reports no error, and one that failed (a full disk) leaves the
  // database refusing writes: the delete of a key that never exists finds that out, and the
  // shard is reopened when released.
  async compact () {
    await this.discardAbandoned()
    const dead = await scans.deadVersions(this.db)
    await this.#deadSpace.compactRange(records.WHOLE.from, records.WHOLE.to)
    await this.#deadSpace.forget([...dead.map(({ id }) => ({ type: 'del', key: id })), { type: 'del', key: records.ACCOUNT + '~probe' }])
  }

  get status () {
    return this.#life.status
  }

  // Settles to the shard's figures once its database is closed, when LevelDB frees its memory.
  close () {
    return this.#life.close(() => {
      const closed = this.#flushAndClose()
      this.#memtables.closing(this, closed)
      return closed
    })
  }

  // Flushes the memtable first, so that reopening replays no log: quick, and a few kilobytes on a
  // full disk. A shard only read from is not flushed, which would still write a manifest.
  async #flushAndClose () {
    await this.#upgrading // stops at its next page
    if (this.db.written && !this.db.failed) await this.db.flush().catch(() => {})
    const figures = await this.figures()
    await this.db.close()
    return figures
  }
}

module.exports = { Shard }

'use strict'

const { madeNotDurable } = require('../leveldb/leveldb')
const { shardName } = require('../base/shard-names')
const records = require('./records')
const { putChunks, commitOps, removeVersion, trashOps } = require('./batches')
const { decodeHead } = require('./head-record')
const { upgradeHeads } = require('./head-upgrade')
const scans = require('./scans')
const { Reservation } = require('./reservation')
const { Fingerprints } = require('./fingerprints')
const { DeadSpace } = require('./dead-space')
const { openShard } = require('./open-shard')
const errors = require('../api/errors')
const { free } = require('../base/freed')
const { Lifecycle } = require('../api/lifecycle')

// Expiry records a collection removes in one batch (collectExpired), and trash records an
// emptying (emptyTrash).
const COLLECT_BATCH = 1000
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
  #disk = { bytes: 0, at: -Infinity, mark: undefined } // diskBytes as last read: when (performance.now()), at which db.changeMark()

  #trash // { files, bytes, first (the earliest trash time), restoredAt (the restore they follow) }

  constructor ({ index, location, db, cap, chunkKeys, sync, memtables, account, dead = 0, created = false, allHeads = false, unsaved = [], nextExpiry, clock = NO_CLOCK, trash }) {
    this.#memtables = memtables
    this.#deadSpace = new DeadSpace(this, dead)
    this.#unsaved = unsaved
    if (created) this.#prints.made()
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
    this.onDead = () => {} // called when `dead` grew
    this.nextExpiry = nextExpiry // the earliest time in its expiry index, or undefined
    this.onExpiry = () => {} // called when nextExpiry came sooner
    this.allHeads = allHeads // every file has a head record (records.HEADS): nothing to upgrade
    this.clock = clock // the store's trash clock (maintenance/trash.js): restoredAt, trashMs
    this.#trash = trash || records.noTrash(clock.restoredAt)
  }

  // The store's last restore time: a file trashed at or before it is not in the trash.
  get restoredAt () {
    return this.clock.restoredAt
  }

  // The files in the trash: { files, bytes, first, last }, relative to the store's restore time
  // (`restoredAt`), which a restore moved past every one counted before.
  trashFigures () {
    const trash = this.#trash
    if (trash.restoredAt !== this.clock.restoredAt) this.#trash = records.noTrash(this.clock.restoredAt)
    return this.#trash
  }

  // The earliest time the collector has work here: an expiry, or trash turning trashMs old.
  get nextDue () {
    const { first } = this.trashFigures()
    const emptied = first === undefined ? undefined : first + this.clock.trashMs
    if (emptied === undefined || !Number.isFinite(emptied)) return this.nextExpiry
    return this.nextExpiry === undefined ? emptied : Math.min(this.nextExpiry, emptied)
  }

  // `meta`'s version leaves the shard (removed or replaced): out of the trash figures.
  #untrashed (meta) {
    if (!records.trashed(meta, this.restoredAt)) return
    const trash = this.trashFigures()
    trash.files--
    trash.bytes -= meta.size
    if (trash.files === 0) Object.assign(trash, { first: undefined, last: undefined })
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
        this.#untrashed(old)
      } else this.#prints.added(meta.key, this.files)
      if (meta.expires !== undefined && !(this.nextExpiry <= meta.expires)) {
        this.nextExpiry = meta.expires
        this.onExpiry(this)
      }
      reservation.release()
      // Here: discardAbandoned() never sees the version pending and no longer being written.
      this.writing.delete(meta.version)
      if (notDurable) throw notDurable
    })
  }

  unlink (key, { sync = false } = {}) {
    return this.exclusive(async () => {
      await this.room()
      const old = await this.getMeta(key)
      // A head left without its metadata (damage) is the file a read finds.
      const head = old ? undefined : await this.db.get(key)
      if (head !== undefined) {
        await this.#write([{ type: 'del', key }, { type: 'put', key: records.deadKey(key, head.toString('hex', 8, 16)), value: String(head.length) }], this.sync || sync)
        return this.#deadSpace.died(head.length)
      }
      if (!old || records.trashed(old, this.restoredAt)) throw errors.notFound(key)
      const ops = [{ type: 'del', key: records.metaKey(key) }]
      if (old.format !== undefined) ops.push({ type: 'del', key })
      removeVersion(ops, this.chunkKeys, key, old)
      const notDurable = await this.#apply(ops, { used: this.used - old.size, files: this.files - 1 }, sync)
      this.#deadSpace.died(old.size)
      this.#prints.removed(key, this.files)
      if (notDurable) throw notDurable
    })
  }

  // Marks `key`'s version trashed at `time` (doc/format.md, "Trash"): readers find no file
  // from then on, until a restore. ENOENT if readers find none now. Synced as unlink is.
  trash (key, time, { sync = false } = {}) {
    return this.exclusive(async () => {
      await this.room()
      const meta = await this.getMeta(key)
      if (!meta || records.gone(meta, Date.now(), this.restoredAt)) throw errors.notFound(key)
      const data = meta.inline ? await this.#inlineData(key) : undefined
      const { ops, head } = trashOps(meta, time, data)
      let notDurable
      try {
        notDurable = await this.#apply(ops, { used: this.used, files: this.files }, sync)
      } finally {
        if (head) free(head)
      }
      if (data && data.length > 0) this.#deadSpace.died(data.length)
      this.#trashed(meta, time)
      if (notDurable) throw notDurable
    })
  }

  // The data an inline head holds, to write it again.
  async #inlineData (key) {
    const head = await this.db.get(key)
    if (head === undefined) throw errors.integrity(key, 'its head record is missing', { chunk: 0 })
    return Buffer.from(decodeHead(key, head).data)
  }

  // `meta`'s version went in the trash at `time`: counted, unless a restore came meanwhile.
  #trashed (meta, time) {
    if (time <= this.restoredAt) return
    const trash = this.trashFigures()
    trash.files++
    trash.bytes += meta.size
    if (!(trash.last >= time)) trash.last = time
    if (trash.first === undefined || time < trash.first) {
      trash.first = time
      this.onExpiry(this)
    }
  }

  // Removes the files whose expiry record is due at `now`, up to `limit` records, in one batch
  // with the accounting, as unlink does. A record naming a version replaced since goes alone.
  // Resolves to the files removed and whether records may be left due; nextExpiry is read
  // again from the index.
  collectExpired (now, limit = COLLECT_BATCH) {
    return this.exclusive(async () => {
      await this.room()
      const due = []
      for await (const entry of this.db.scan({ ...records.dueRange(now), limit, valueAsBuffer: false })) due.push(entry)
      const ops = []
      const gone = []
      for (const { key: id, value: version } of due) {
        const { key } = records.parseExpiryKey(id)
        ops.push({ type: 'del', key: id })
        const meta = await this.getMeta(key)
        if (!meta || meta.version !== version || !records.expired(meta, now)) continue
        ops.push({ type: 'del', key: records.metaKey(key) })
        if (meta.format !== undefined) ops.push({ type: 'del', key })
        removeVersion(ops, this.chunkKeys, key, meta)
        gone.push(meta)
      }
      const notDurable = await this.#removeAll(ops, gone, false)
      this.nextExpiry = await scans.firstExpiry(this.db)
      if (notDurable) throw notDurable
      return { files: gone.length, more: due.length === limit }
    })
  }

  // Removes for good, in one synced batch, up to `limit` files in the trash trashed before
  // `before` (ms); `restoredAt`: the restore time the caller holds still (the trash lock).
  // Resolves to { files, bytes, more }.
  emptyTrash (restoredAt, before, limit = COLLECT_BATCH) {
    return this.exclusive(async () => {
      await this.room()
      const ops = []
      const gone = []
      let found = 0
      for await (const { key: id } of this.db.scan({ ...records.trashRange(restoredAt, before), limit, values: false })) {
        found++
        const { trashed, key } = records.parseTrashKey(id)
        ops.push({ type: 'del', key: id })
        const meta = await this.getMeta(key)
        if (!meta || meta.trashed !== trashed) continue
        ops.push({ type: 'del', key: records.metaKey(key) })
        if (meta.format !== undefined) ops.push({ type: 'del', key })
        removeVersion(ops, this.chunkKeys, key, meta)
        gone.push(meta)
      }
      const notDurable = await this.#removeAll(ops, gone, true)
      if (gone.length) this.trashFigures().first = await scans.firstTrash(this.db, restoredAt)
      if (notDurable) throw notDurable
      return { files: gone.length, bytes: gone.reduce((sum, meta) => sum + meta.size, 0), more: found === limit }
    })
  }

  // Writes `ops`, which remove the versions `gone`, with the accounting.
  async #removeAll (ops, gone, sync) {
    if (!ops.length) return undefined
    const used = gone.reduce((sum, meta) => sum + meta.size, 0)
    const notDurable = await this.#apply(ops, { used: this.used - used, files: this.files - gone.length }, sync)
    this.#deadSpace.died(used)
    for (const meta of gone) {
      this.#prints.removed(meta.key, this.files)
      this.#untrashed(meta)
    }
    return notDurable
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

  async discard (key, version) {
    await this.db.clear(this.chunkKeys.range(key, version))
    await this.db.batch([{ type: 'del', key: records.pendingKey(version) }])
  }

  // Discards the pending versions not being written by this process: what a crash or a failed
  // cleanup left. Exclusive of commits, which leave `writing` in their own section.
  discardAbandoned () {
    return this.exclusive(async () => {
      for (const { key, version } of await scans.pendingVersions(this.db)) {
        if (!this.writing.has(version)) await this.discard(key, version)
      }
    })
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

  // `maxAge`: how old, in ms, the disk bytes may be; `sinceChange`: read again as well once
  // this process wrote or compacted the shard since. Reading them lists its directory.
  async figures ({ maxAge = 0, sinceChange = false } = {}) {
    const at = performance.now()
    const mark = this.db.changeMark()
    if (at - this.#disk.at > maxAge || (sinceChange && (mark === undefined || mark !== this.#disk.mark))) {
      // LevelDB's tables, and its log: an open shard's recent writes are only there.
      const [tables, logs] = await Promise.all([this.db.approximateSize(records.WHOLE.from, records.WHOLE.to).catch(() => 0), this.db.logBytes()])
      this.#disk = { bytes: tables + logs, at, mark }
    }
    return { used: this.used, files: this.files, diskBytes: this.#disk.bytes, dead: this.dead, nextExpiry: this.nextExpiry, trash: { ...this.trashFigures() } }
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

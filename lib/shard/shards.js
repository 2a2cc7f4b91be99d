'use strict'

const { ShardPool } = require('./pool')
const { ShardOpener } = require('./opener')
const { defaultOpenShards } = require('../dir/descriptors')
const { Memtables } = require('./memtables')
const { WRITE_BUFFER } = require('../leveldb/leveldb')
const { filePage, fileFirstExpiry, FILES } = require('./file-pages')
const { openAhead } = require('./open-ahead')
const { noTrash } = require('./records')
const errors = require('../api/errors')

const META_PAGE = 1000 // metadata records read per shard visit by list() and verify()
// totals() reads an open shard's disk bytes again once they are this old (ms): reading them lists
// its directory, about 60 µs of CPU a shard, and a scrape every second must stay cheap.
const DISK_BYTES_AGE = 5000

// The shards of an open store: leases on them (opened and made through the pool and the
// opener), their metadata pages and figures, holds for repair, and the disk reserve's use.
class Shards {
  #pool
  #opener
  #operations // the store's: every lease is one of them
  #writers = 0 // write leases not yet released
  #busyPeriod = 0 // counts the times #writers rose from 0

  // heldAbove(): the bytes the store's writers and readers hold (api/memory.js).
  // clock: the store's trash clock (maintenance/trash.js).
  constructor ({ location, tmpDir, cap, chunkKeys, shardCount, existing, usage, reserve, operations, options, heldAbove, clock }) {
    this.location = location
    this.shardCount = shardCount
    this.tmpDir = tmpDir
    this.cap = cap
    this.chunkKeys = chunkKeys
    this.usage = usage
    this.clock = clock
    this.reserve = reserve
    this.sync = options.sync
    this.readOnly = options.readOnly // shards open through shadows, and none is created
    this.onDead = () => {} // called when a shard holds more dead bytes (Reclaimer)
    this.onWrite = () => {} // called when a write begins (Reclaimer)
    this.onExpiry = () => {} // called with a shard whose nextExpiry came sooner (Collector)
    this.#operations = operations
    this.memtables = new Memtables({ limit: options.memory, others: heldAbove })
    this.#opener = new ShardOpener(this, existing)
    this.#pool = new ShardPool({
      maxOpen: options.maxOpenShards || defaultOpenShards(shardCount),
      idleTimeout: options.idleTimeout,
      waitTimeout: options.shardWaitTimeout,
      open: (index, context) => this.#opener.open(index, context),
      close: (shard) => this.#opener.close(shard)
    })
  }

  locationOf (index) {
    return this.#opener.locationOf(index)
  }

  has (index) {
    return this.#opener.has(index)
  }

  indices () {
    return this.#opener.indices()
  }

  // 0 if no write is in progress, else a number that stays the same until none is (the
  // Reclaimer yields to writes, not for ever to a steady writer).
  writing () {
    return this.#writers > 0 ? this.#busyPeriod : 0
  }

  // The shard `index`, held for one operation, which close() waits for until release()
  // (idempotent): { shard, release, mayWrite }. Once the store closes, a lease is refused
  // (ECLOSED) unless `admitted`: part of a call or stream let in before, which still gets an
  // open shard but neither waits for nor opens one once the pool shuts down. `signal` ends a
  // wait for a slot or for the disk reserve. A write lease is refused once the disk reserve was
  // given up, and its mayWrite() throws from then on, so that writes in flight stop before
  // their next batch. The reserve is for reading and freeing space: only leases that do that
  // pass `useReserve` (reads, list, stat, verify, unlink, compact).
  async lease (index, { write = false, useReserve = false, admitted = false, signal } = {}) {
    const leave = this.#operations.enter({ admitted })
    if (write) {
      if (this.#writers++ === 0) this.#busyPeriod++
      this.onWrite()
    }
    let held
    try {
      if (write && this.reserve.low && !(await this.reserve.roomForWrites(signal))) throw this.#noRoomForWrites()
      const shard = this.#pool.useOpen(index, { whileClosing: admitted }) || (await this.#pool.acquire(index, { useReserve }, signal))
      held = this.#held(shard, leave, write)
      if (write) held.mayWrite()
      return held
    } catch (err) {
      if (held) held.release()
      else {
        if (write) this.#writers--
        leave()
      }
      throw err
    }
  }

  // A read lease, as lease() would resolve to, when the shard is open and free now, else
  // undefined: a promise is much of a small file's read (doc/performance.md, "Format 3: a piece
  // is one get").
  leaseOpen (index, { admitted = false } = {}) {
    if (this.#operations.closed && !admitted) return undefined // lease() refuses it
    const shard = this.#pool.useOpen(index, { whileClosing: admitted })
    return shard && this.#held(shard, this.#operations.enter({ admitted }), false)
  }

  #held (shard, leave, write) {
    let released = false
    return {
      shard,
      release: () => {
        if (released) return
        released = true
        this.#pool.release(shard)
        if (write) this.#writers--
        leave()
      },
      mayWrite: () => {
        if (this.reserve.low) throw this.#noRoomForWrites()
      }
    }
  }

  // Calls fn(shard) with the shard leased. On a full disk LevelDB needs room to reopen a shard
  // or to delete: with `useReserve`, the reserve is given up and fn tried again, on a shard
  // reopened if the failure left its LevelDB refusing writes (the pool closes it on release).
  inShard (index, fn, { useReserve = false, admitted = false } = {}) {
    let refused // the failure that left the shard's LevelDB refusing writes
    const held = async () => {
      const { shard, release } = await this.lease(index, { useReserve, admitted })
      try {
        return await fn(shard)
      } catch (err) {
        if (err === shard.db.failed) refused = err
        throw err
      } finally {
        release()
      }
    }
    return useReserve ? this.reserve.withRoom(held, (err) => err === refused) : held()
  }

  #noRoomForWrites () {
    return errors.diskFull(this.location, 'kfs gave up its reserve so that files stay readable and removable; ' +
      'writes resume once unlink() and compact(), or other programs, free space', {})
  }

  // The shard's metadata records, a page at a time, holding the shard only while a page is read.
  // `first`: the first page, fetched ahead by the caller.
  async * metaPages (index, first, { admitted = false } = {}) {
    for (let page = await (first || this.metaPage(index, undefined, { admitted })); ; page = await this.metaPage(index, page[page.length - 1].key, { admitted, files: page[FILES] })) {
      if (page.length) yield page
      if (page.length < META_PAGE) return
    }
  }

  // One page of metadata records after the key `after`. A shard nobody has open is read from its
  // files where it can (file-pages.js); one in use, through LevelDB, as its files may change
  // meanwhile. `files`: page[FILES] of the page before, if it was read so.
  async metaPage (index, after, { admitted = false, files } = {}) {
    if (this.#closedForGood(index)) {
      const leave = this.#operations.enter({ admitted })
      try {
        const page = await filePage(this.locationOf(index), index, after, META_PAGE, files)
        if (page && this.#closedForGood(index)) return page // else its open may have raced the read
      } finally {
        leave()
      }
    }
    return this.inShard(index, (shard) => shard.metaPage(after, META_PAGE), { useReserve: true, admitted })
  }

  // The earliest expiry of shard `index`, nobody having it open, read from its files
  // (file-pages.js): a time, or undefined if it has none. Rejects where it cannot be read so.
  async closedFirstExpiry (index) {
    if (!this.#closedForGood(index)) throw errors.shardBusy(index, 'is in use, or not as it was left')
    const leave = this.#operations.enter()
    try {
      return await fileFirstExpiry(this.locationOf(index))
    } finally {
      leave()
    }
  }

  #closedForGood (index) {
    return !this.#pool.closing && !this.#pool.inUse(index) && this.#opener.asLeft(index)
  }

  // Exact figures: live for an open shard (its disk bytes read again once it changed, or
  // DISK_BYTES_AGE old), cached at close for the others. Only a shard whose cache a crash
  // left untrusted is opened.
  async figures (index) {
    const open = this.#pool.peek(index)
    return (open && (await open.figures({ maxAge: DISK_BYTES_AGE, sinceChange: true }))) || this.usage.get(index) || this.inShard(index, (shard) => shard.figures(), { useReserve: true, admitted: true })
  }

  // Every shard's figures summed, no shard opened: an open shard's live (figures(), its disk bytes
  // at most DISK_BYTES_AGE old), the others' as cached at their close. `uncounted`: shards whose cached figures are not trusted (a crash
  // left them, or a kfs that kept no `dead`), counted from their next open.
  async totals () {
    const indices = this.indices()
    const sums = { shards: indices.length, files: 0, used: 0, diskBytes: 0, dead: 0, uncounted: 0, trash: { files: 0, bytes: 0 } }
    const live = []
    for (const index of indices) {
      const open = this.#pool.peek(index)
      const cached = open ? undefined : this.usage.get(index)
      if (open) live.push(open.figures({ maxAge: DISK_BYTES_AGE }))
      else if (cached) addFigures(sums, cached, this.trashOf(cached))
      else sums.uncounted++
    }
    for (const figures of await Promise.all(live)) addFigures(sums, figures, this.trashOf(figures))
    return sums
  }

  // Shard `index`'s trash, { files, bytes, first }: an open shard's live, a closed one's as
  // cached at its close; only a shard whose cache a crash left untrusted is opened.
  trashIn (index) {
    const open = this.#pool.peek(index)
    if (open) return open.trashFigures()
    const cached = this.usage.get(index)
    return cached ? this.trashOf(cached) : this.inShard(index, (shard) => shard.trashFigures(), { useReserve: true, admitted: true })
  }

  // The trash in a shard's `figures` (Shard#figures): none if a restore came since.
  trashOf ({ trash }) {
    return trash && trash.restoredAt === this.clock.restoredAt ? trash : noTrash(this.clock.restoredAt)
  }

  // Shards open now, opened and closed since the store opened, and the memtables' flushes.
  activity () {
    const { opens, closes } = this.#opener
    const { flushes, quietFlushes } = this.memtables
    return { open: this.#pool.openCount, opens, closes, flushes, quietFlushes }
  }

  knownFiles (index) {
    const open = this.#pool.peek(index)
    return open ? open.files : (this.usage.get(index) || {}).files
  }

  openShards () {
    return this.#pool.openShards()
  }

  // Whether the disk has room, besides the reserve, to compact `piece` of a plan: its tables'
  // bytes and the memtables LevelDB writes out first. A compaction that meets a full disk leaves
  // the shard to close unflushed, and its reopening would take the reserve's room.
  roomToCompact (piece) {
    return this.reserve.hasRoom(piece.tables + 2 * WRITE_BUFFER)
  }

  hold (index, why) {
    return this.#pool.hold(index, why)
  }

  unhold (index) {
    this.#pool.unhold(index)
  }

  markCleaned (index) {
    this.#opener.markCleaned(index)
  }

  openAhead () {
    return openAhead([...this.indices(), ...this.#opener.unmade()], {
      pool: this.#pool,
      mayMake: (index) => this.has(index) || !this.reserve.low // made on a write's need only
    })
  }

  // From now on leases fail with ECLOSED: operations in flight drain.
  shutdown () {
    this.#pool.shutdown()
    this.memtables.stop()
  }

  // Spares first: on a full disk, a shard's close needs their space to flush.
  async closeAll () {
    await this.#opener.stop()
    return this.#pool.closeAll()
  }
}

function addFigures (sums, { files, used, diskBytes, dead }, trash) {
  sums.trash.files += trash.files
  sums.trash.bytes += trash.bytes
  sums.files += files
  sums.used += used
  sums.diskBytes += diskBytes
  sums.dead += dead
}

module.exports = { Shards }

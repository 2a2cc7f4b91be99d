'use strict'

const fs = require('node:fs')
const path = require('node:path')
const { Shard } = require('./shard')
const { createShard, syncPlaced, makeTemplate } = require('./create')
const { ShardPool } = require('./pool')
const { Spares } = require('./spares')
const { defaultOpenShards } = require('../dir/descriptors')
const { shardName, shardDirName } = require('../base/shard-names')
const { Memtables } = require('./memtables')
const { ownersRefusal } = require('../dir/owner')
const { WRITE_BUFFER } = require('../leveldb/leveldb')
const { filePage, FILES } = require('./file-pages')
const { openAhead } = require('./open-ahead')
const errors = require('../api/errors')

// Metadata records read per shard visit by list() and verify().
const META_PAGE = 1000
// A new shard's figures: the template's accounting record (create.js).
const NEW_FIGURES = { used: 0, files: 0, diskBytes: 0 }

// The shards of an open store: which exist, leases on them (opening and creating them
// through the pool), their cached figures, exclusive holds for repair, and the disk
// reserve that lets them open and free space on a full disk.
class Shards {
  #pool
  #existing // indices of shards created, on disk or known to the usage cache
  #cleaned = new Set() // shards whose abandoned writes were discarded since open
  #unnoted = new Map() // index -> log records LevelDB dropped, not yet noted in the shard
  #unsynced = new Set() // shards renamed into place whose directory's sync has not succeeded
  #operations // the store's: every lease is one of them
  #writers = 0 // write leases not yet released
  #busyPeriod = 0 // counts the times #writers rose from 0
  #template // promise of the files of a new shard (create.js), made on first need
  #spares // new shards made ahead (spares.js)

  // heldAbove(): the bytes the store's writers and readers hold, which leave the
  // memtables less of its memory budget (options.memory, api/memory.js).
  constructor ({ location, tmpDir, cap, chunkKeys, shardCount, existing, usage, reserve, operations, options, heldAbove }) {
    this.location = location
    this.shardCount = shardCount
    this.tmpDir = tmpDir
    this.cap = cap
    this.chunkKeys = chunkKeys
    this.usage = usage
    this.reserve = reserve
    this.sync = options.sync
    this.readOnly = options.readOnly // shards open through shadows, and none is created
    this.onDead = () => {} // called when a shard holds more dead bytes (Reclaimer)
    this.onWrite = () => {} // called when a write begins (Reclaimer)
    this.#operations = operations
    this.#spares = new Spares(tmpDir, () => !reserve.low) // none made on a full disk
    this.#existing = new Set([...existing, ...usage.known])
    const maxOpen = options.maxOpenShards || defaultOpenShards(shardCount)
    this.memtables = new Memtables({ limit: options.memory, others: heldAbove })
    this.#pool = new ShardPool({
      maxOpen,
      idleTimeout: options.idleTimeout,
      waitTimeout: options.shardWaitTimeout,
      open: (index, context) => this.#open(index, context).catch(async (err) => {
        if (errors.isDiskFull(err)) await this.#spares.clear() // their space is needed now
        const location = this.locationOf(index)
        throw await ownersRefusal(err, [this.location, location], [path.join(location, 'LOCK')], { readOnly: this.readOnly, props: { shard: index } })
      }),
      close: (shard) => this.#close(shard)
    })
  }

  locationOf (index) {
    return path.join(this.location, shardDirName(index))
  }

  has (index) {
    return this.#existing.has(index)
  }

  indices () {
    return [...this.#existing].sort((a, b) => a - b)
  }

  // Whether a write is in progress: 0 if none, else a number that stays the same until
  // there is none again (the Reclaimer yields to writes, not for ever to a steady writer).
  writing () {
    return this.#writers > 0 ? this.#busyPeriod : 0
  }

  // The shard `index`, held for one operation: { shard, release, mayWrite }. Until
  // release() (idempotent) the operation is one that close() waits for. Once the store
  // closes, a lease is refused (ECLOSED) unless `admitted`: part of a call or stream the
  // store let in before (a write, a read, a lookup, reclaim()), which still gets a
  // shard that is open (the pool closes them only once such work is done) but neither
  // waits for nor opens one once the pool shuts down; work that visits shard after
  // shard (list, verify, compact, background reclaiming) stops at the next one instead.
  // `signal`: aborting it ends a wait for a slot, or for the disk reserve to be made
  // again (a stream destroyed). A write lease counts as a write in progress, and is
  // refused once the disk reserve was given up; its mayWrite() throws from then on, so
  // that writes in flight stop before their next batch. The reserve is for reading and freeing space: only leases that do that pass
  // `useReserve` (reads, list, stat, verify, unlink, compact); writes and background
  // work (reclaiming) never give it up.
  async lease (index, { write = false, useReserve = false, admitted = false, signal } = {}) {
    const leave = this.#operations.enter({ admitted })
    if (write) {
      if (this.#writers++ === 0) this.#busyPeriod++
      this.onWrite()
    }
    let held
    try {
      // Only once the reserve was given up: refused before a shard is created or opened.
      if (write && this.reserve.low && !(await this.reserve.roomForWrites(signal))) throw this.#noRoomForWrites()
      const shard = this.#pool.useOpen(index, { whileClosing: admitted }) || (await this.#pool.acquire(index, { useReserve }, signal))
      held = this.#held(shard, leave, write)
      if (write) held.mayWrite()
      return held
    } catch (err) {
      // Refused before a shard was held (useOpen and acquire hold none when they fail).
      if (held) held.release()
      else {
        if (write) this.#writers--
        leave()
      }
      throw err
    }
  }

  // A read lease, as lease() would resolve to, when the shard is open and free now: no
  // promise, no turn of the event loop (a read of a small file is one get, and these
  // were much of its cost: doc/performance.md, "Format 3: a piece is one get"). Else
  // undefined, and the caller takes lease().
  leaseOpen (index, { admitted = false } = {}) {
    if (this.#operations.closed && !admitted) return undefined // lease() refuses it
    const shard = this.#pool.useOpen(index, { whileClosing: admitted })
    return shard && this.#held(shard, this.#operations.enter({ admitted }), false)
  }

  // The lease of `shard`, taken by an operation that `leave` ends.
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

  // Calls fn(shard) with the shard leased (`admitted`: see lease). On a full disk,
  // LevelDB needs room to reopen a shard or to delete: with `useReserve`, the reserve
  // is given up once and fn tried again, on a shard reopened if the failure left its
  // LevelDB refusing writes (the pool closes it once released); such a failure is
  // tried again even if the reserve was given up before.
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

  // The shard's metadata records, a page at a time, holding the shard only while a
  // page is read. `first`: the first page, fetched ahead by the caller (metaPage()).
  async * metaPages (index, first, { admitted = false } = {}) {
    for (let page = await (first || this.metaPage(index, undefined, { admitted })); ; page = await this.metaPage(index, page[page.length - 1].key, { admitted, files: page[FILES] })) {
      if (page.length) yield page
      if (page.length < META_PAGE) return
    }
  }

  // One page of metadata records after the key `after` (from the first without it). A
  // shard nobody has open is read from its files, neither opened nor changed
  // (file-pages.js), unless they hold what the reader does not know; one open in this
  // process (or opening, closing, held), through LevelDB: its files may change under a
  // reader meanwhile. `files`: page[FILES] of the page before, if it was read so.
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

  // Whether the shard is closed, and would open as LevelDB left it: no repair
  // interrupted, no records LevelDB dropped left to note, its placement synced.
  #closedForGood (index) {
    return !this.#pool.closing && !this.#pool.inUse(index) && !this.usage.isRepairing(index) && !this.#unnoted.has(index) && !this.#unsynced.has(index)
  }

  // Exact figures: live for an open shard, cached at close for the others. Only a
  // shard whose cache a crash left untrusted is opened.
  async figures (index) {
    const open = this.#pool.peek(index)
    return (open && (await open.figures())) || this.usage.get(index) || this.inShard(index, (shard) => shard.figures(), { useReserve: true, admitted: true })
  }

  // Files the shard held as far as anyone knows, without opening it.
  knownFiles (index) {
    const open = this.#pool.peek(index)
    return open ? open.files : (this.usage.get(index) || {}).files
  }

  openShards () {
    return this.#pool.openShards()
  }

  // Whether the disk has room to compact `piece` of a plan (Shard#reclaimPlan) without
  // the reserve's room: its table bytes, about what compacting it writes, and the
  // memtables LevelDB writes out first. A compaction that meets the full disk leaves the
  // shard's LevelDB refusing writes, so the shard is closed with its memtable unwritten,
  // and reopening it (replaying its log) would take the reserve's room.
  roomToCompact (piece) {
    return this.reserve.hasRoom(piece.tables + 2 * WRITE_BUFFER)
  }

  hold (index, why) {
    return this.#pool.hold(index, why)
  }

  unhold (index) {
    this.#pool.unhold(index)
  }

  // A repaired shard needs no cleaning when it next opens.
  markCleaned (index) {
    this.#cleaned.add(index)
    this.#existing.add(index)
  }

  // ahead: opened or made by openAhead, which takes no spare (spares are for the writes
  // that make a shard; and a spare taken makes another, work that would keep a process
  // with nothing else to do alive from one round to the next).
  async #open (index, { useReserve = false, ahead = false } = {}) {
    const room = useReserve ? (fn) => this.reserve.withRoom(fn) : (fn) => fn()
    if (this.usage.isRepairing(index)) {
      throw errors.corrupt(`shard ${shardName(index)}`, `a repair of it was interrupted; run kfs repair ${index} to finish it`, { shard: index })
    }
    const location = this.locationOf(index)
    const created = !this.#existing.has(index)
    if (created) {
      if (this.readOnly) throw errors.readOnly(`the store at ${this.location}`, { path: this.location })
      try {
        await room(async () => {
          const template = await this.#newShardFiles()
          const spare = template && !ahead && this.#spares.take(template, this.shardCount - this.#existing.size - 1)
          await createShard(location, this.tmpDir, template, { placed: false, spare })
        })
      } finally {
        // Renamed into place: it exists, and every open syncs it into its directory until
        // that succeeded.
        if (fs.existsSync(location)) {
          this.#existing.add(index)
          this.#unsynced.add(index)
          if (this.#existing.size >= this.shardCount) this.#spares.clear() // none is wanted any more
        }
      }
    }
    // While LevelDB opens the shard; awaited before kfs writes anything into it.
    const placed = this.#unsynced.has(index) ? syncPlaced(location) : undefined
    if (placed) placed.catch(() => {}) // unless the open fails first
    // A shard just made holds the template's figures: it is marked open (and known)
    // while LevelDB opens it, once it is surely in place, never before: a crash must
    // not leave a shard known whose rename was lost.
    const marked = created && (placed || Promise.resolve()).then(() => room(() => this.usage.opened(index, NEW_FIGURES)))
    if (marked) marked.catch(() => {}) // unless the open fails first
    const shard = await room(async () => {
      try {
        const { cap, chunkKeys, sync, memtables, readOnly } = this
        return await Shard.open({ index, location, cap, chunkKeys, sync, memtables, readOnly, unnoted: this.#unnoted.get(index), created })
      } catch (err) {
        // LevelDB reports dropped log records once, in the LOG of the open that dropped
        // them: if noting them failed, they are kept here for the next try.
        if (err.dropped) this.#unnoted.set(index, err.dropped)
        throw err
      }
    }).catch(async (err) => {
      await Promise.allSettled([placed, marked]) // no work of a failed open outlives it
      throw err
    })
    if (placed) {
      await placed.catch(async (err) => { await shard.close().catch(() => {}); throw err })
      this.#unsynced.delete(index)
    }
    this.#unnoted.delete(index)
    shard.onDead = this.onDead
    if (shard.dead > 0) this.onDead()
    try {
      // Read-only: abandoned writes stay, unseen (reads see committed files only). A shard
      // just created has none.
      if (created) this.#cleaned.add(index)
      if (!this.#cleaned.has(index) && !this.readOnly) {
        // Frees space; on a full disk it waits for the next open or compact().
        await shard.discardAbandoned().then(() => this.#cleaned.add(index), (err) => {
          if (!errors.isDiskFull(err)) throw err
        })
      }
      await (marked || room(() => this.usage.opened(index, { used: shard.used, files: shard.files, diskBytes: 0 })))
      // In the background; it never rejects, and never spends the disk reserve.
      if (!this.readOnly) shard.upgradeHeads({ room: async (bytes) => !this.reserve.low && (await this.reserve.hasRoom(bytes + 2 * WRITE_BUFFER)) })
    } catch (err) {
      await shard.close().catch(() => {})
      throw err
    }
    return shard
  }

  // Opens every shard that exists, then makes and opens those not made yet, in the
  // background of a store just opened (open-ahead.js). Resolves once done; never rejects.
  openAhead () {
    return openAhead([...this.indices(), ...this.#unmade()], {
      pool: this.#pool,
      mayMake: (index) => this.has(index) || !this.reserve.low // made on a write's need only
    })
  }

  // The shards of this store not made yet; none for a store opened read-only.
  #unmade () {
    if (this.readOnly) return []
    return Array.from({ length: this.shardCount }, (_, index) => index).filter((index) => !this.has(index))
  }

  // Made once per store open, and again after a failure (a full disk, say).
  #newShardFiles () {
    if (!this.#template) {
      this.#template = makeTemplate(this.tmpDir)
      this.#template.catch(() => { this.#template = undefined })
    }
    return this.#template
  }

  async #close (shard) {
    // A write that failed (a full disk) may have left chunks its abort could not
    // remove: the next open looks for them again.
    if (shard.db.failed) this.#cleaned.delete(shard.index)
    // Measured once its memtable is written out: the figures it has when it opens again.
    const figures = await shard.close()
    await this.usage.closed(shard.index, figures)
  }

  // From now on leases fail with ECLOSED, so operations in flight drain.
  shutdown () {
    this.#pool.shutdown()
    this.memtables.stop()
  }

  // Spares first: on a full disk, a shard's close needs their space to flush.
  async closeAll () {
    await this.#spares.close()
    return this.#pool.closeAll()
  }
}

module.exports = { Shards }

'use strict'

const fs = require('node:fs')
const path = require('node:path')
const { Shard } = require('./shard')
const { createShard, syncPlaced, makeTemplate } = require('./create')
const { Spares } = require('./spares')
const { shardName, shardDirName } = require('../base/shard-names')
const { ownersRefusal } = require('../dir/owner')
const { WRITE_BUFFER } = require('../leveldb/leveldb')
const errors = require('../api/errors')

const NEW_FIGURES = { used: 0, files: 0, diskBytes: 0 }

// Opens the shards of a store for its pool, making those not made yet: which shards exist, a
// new shard's placement durable before anything is written into it, the log records LevelDB
// dropped kept until noted, abandoned writes cleaned up once per open of the store.
class ShardOpener {
  #existing // indices of shards created, on disk or known to the usage cache
  #cleaned = new Set() // shards whose abandoned writes were discarded since the store opened
  #unnoted = new Map() // index -> log records LevelDB dropped, not yet noted in the shard
  #unsynced = new Set() // shards renamed into place whose directory's sync has not succeeded
  #template // promise of the files of a new shard (create.js), made on first need
  #spares // new shards made ahead (spares.js)
  #shards // the Shards: their location, options, usage cache, reserve and memtables
  opens = 0 // shards opened since the store opened
  closes = 0 // and closed

  constructor (shards, existing) {
    this.#shards = shards
    this.#existing = new Set([...existing, ...shards.usage.known])
    this.#spares = new Spares(shards.tmpDir, () => !shards.reserve.low) // none on a full disk
  }

  locationOf (index) {
    return path.join(this.#shards.location, shardDirName(index))
  }

  has (index) {
    return this.#existing.has(index)
  }

  indices () {
    return [...this.#existing].sort((a, b) => a - b)
  }

  unmade () {
    if (this.#shards.readOnly) return []
    return Array.from({ length: this.#shards.shardCount }, (_, index) => index).filter((index) => !this.has(index))
  }

  // A repaired shard needs no cleaning.
  markCleaned (index) {
    this.#cleaned.add(index)
    this.#existing.add(index)
  }

  // Whether the shard would open as LevelDB left it: nothing to finish, note or sync.
  asLeft (index) {
    return !this.#shards.usage.isRepairing(index) && !this.#unnoted.has(index) && !this.#unsynced.has(index)
  }

  // The shard `index` opened, made first if need be. `useReserve`: it may give up the disk
  // reserve. `ahead`: for openAhead, which takes no spare: a spare taken makes another, work
  // that would keep a process with nothing else to do alive.
  open (index, { useReserve = false, ahead = false } = {}) {
    const room = useReserve ? (fn) => this.#shards.reserve.withRoom(fn) : (fn) => fn()
    return this.#open(index, room, ahead).catch(async (err) => {
      if (errors.isDiskFull(err)) await this.#spares.clear() // their space is needed now
      const location = this.locationOf(index)
      const { readOnly } = this.#shards
      throw await ownersRefusal(err, [this.#shards.location, location], [path.join(location, 'LOCK')], { readOnly, props: { shard: index } })
    })
  }

  async #open (index, room, ahead) {
    if (this.#shards.usage.isRepairing(index)) {
      throw errors.corrupt(`shard ${shardName(index)}`, `a repair of it was interrupted; run kfs repair ${index} to finish it`, { shard: index })
    }
    const created = !this.#existing.has(index)
    if (created) await this.#make(index, room, ahead)
    const { shard, marked } = await this.#openPlaced(index, created, room)
    this.opens++
    this.#unnoted.delete(index)
    shard.onDead = this.#shards.onDead
    shard.onExpiry = this.#shards.onExpiry
    if (shard.nextDue !== undefined) this.#shards.onExpiry(shard)
    if (shard.dead > 0) this.#shards.onDead()
    try {
      await this.#prepare(shard, created, marked, room)
    } catch (err) {
      await shard.close().catch(() => {})
      throw err
    }
    return shard
  }

  // Once renamed into place the shard exists, and each open syncs its placement until one did.
  async #make (index, room, ahead) {
    const { readOnly, tmpDir, shardCount } = this.#shards
    if (readOnly) throw errors.readOnly(`the store at ${this.#shards.location}`, { path: this.#shards.location })
    const location = this.locationOf(index)
    try {
      await room(async () => {
        const template = await this.#newShardFiles()
        const spare = template && !ahead && this.#spares.take(template, shardCount - this.#existing.size - 1)
        await createShard(location, tmpDir, template, { placed: false, spare })
      })
    } finally {
      if (fs.existsSync(location)) {
        this.#existing.add(index)
        this.#unsynced.add(index)
        if (this.#existing.size >= shardCount) this.#spares.clear() // none is wanted any more
      }
    }
  }

  // Opens the shard while its placement is synced, which ends before anything is written into
  // it. A shard just made is marked open (and known) in the usage cache once surely in place:
  // a crash must not leave a shard known whose rename was lost. `marked`: that mark.
  async #openPlaced (index, created, room) {
    const placed = this.#unsynced.has(index) ? syncPlaced(this.locationOf(index)) : undefined
    if (placed) placed.catch(() => {}) // unless the open fails first
    const marked = created && (placed || Promise.resolve()).then(() => room(() => this.#shards.usage.opened(index, NEW_FIGURES)))
    if (marked) marked.catch(() => {}) // unless the open fails first
    const shard = await room(() => this.#openShard(index, created)).catch(async (err) => {
      await Promise.allSettled([placed, marked]) // no work of a failed open outlives it
      throw err
    })
    if (placed) {
      await placed.catch(async (err) => { await shard.close().catch(() => {}); throw err })
      this.#unsynced.delete(index)
    }
    return { shard, marked }
  }

  async #openShard (index, created) {
    const { cap, chunkKeys, sync, memtables, readOnly, clock } = this.#shards
    try {
      return await Shard.open({ index, location: this.locationOf(index), cap, chunkKeys, sync, memtables, readOnly, unnoted: this.#unnoted.get(index), created, clock })
    } catch (err) {
      // LevelDB reports dropped log records once: kept for the next try if noting them failed.
      if (err.dropped) this.#unnoted.set(index, err.dropped)
      throw err
    }
  }

  // Discards abandoned writes (read-only: they stay, unseen), marks the shard open in the usage
  // cache, and upgrades its files' heads in the background.
  async #prepare (shard, created, marked, room) {
    const { index } = shard
    const { readOnly, reserve, usage } = this.#shards
    if (created) this.#cleaned.add(index)
    if (!this.#cleaned.has(index) && !readOnly) {
      // On a full disk it waits for the next open or compact().
      await shard.discardAbandoned().then(() => this.#cleaned.add(index), (err) => {
        if (!errors.isDiskFull(err)) throw err
      })
    }
    await (marked || room(() => usage.opened(index, { used: shard.used, files: shard.files, diskBytes: 0 })))
    if (!readOnly) shard.upgradeHeads({ room: async (bytes) => !reserve.low && (await reserve.hasRoom(bytes + 2 * WRITE_BUFFER)) })
  }

  // Made once per store open, and again after a failure (a full disk, say).
  #newShardFiles () {
    if (!this.#template) {
      this.#template = makeTemplate(this.#shards.tmpDir)
      this.#template.catch(() => { this.#template = undefined })
    }
    return this.#template
  }

  // Caches the shard's figures once it is closed. A write that failed (a full disk) may have
  // left chunks its abort could not remove: the next open looks for them again.
  async close (shard) {
    if (shard.db.failed) this.#cleaned.delete(shard.index)
    const figures = await shard.close()
    this.closes++
    await this.#shards.usage.closed(shard.index, figures)
  }

  stop () {
    return this.#spares.close()
  }
}

module.exports = { ShardOpener }

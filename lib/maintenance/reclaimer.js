'use strict'

const errors = require('../api/errors')

// Dead bytes (removed versions not yet compacted away) in the open shards of a store
// past which a write starts reclaiming at once: the store's directory never grows to
// hold much more than its live data plus this. Removals alone take no more disk: a
// burst of them is reclaimed once it pauses, not alongside it.
const RECLAIM_AT = 256 * 1024 * 1024
// Reclaiming at once goes on until this much is left.
const RECLAIM_DOWN_TO = 64 * 1024 * 1024
// After this long without a new removal, whatever is left is reclaimed.
const IDLE_MS = 2000
// Before each piece of work, reclaiming waits for writes in progress to end, but not
// longer than this: writes that outlast it are long ones, and the pieces then go on
// alongside them until the store stops writing, so that reclaiming keeps pace with a
// steady writer.
const YIELD_MS = 100
const POLL_MS = 10
// Dead bytes past which reclaiming no longer waits for writes.
const RECLAIM_NOW = 1024 * 1024 * 1024

// Gives the space of unlinked and overwritten files back in the background, one shard
// at a time (LevelDB runs every compaction of a process on one thread anyway): the
// shard with the most dead bytes first. The work comes in pieces (Shard.reclaimPlan),
// and writes go first: a compaction holding LevelDB's background thread delays every
// shard's memtable flushes, so a write into another shard would stall behind it. The
// shard is held only while a piece is compacted. Shards that are closed keep their
// notes and are reclaimed once opened again. Failures (a full disk) are left for the
// next try; so is a piece the disk has no room for besides the disk reserve's: it
// fails with ENOSPC before it starts.
class Reclaimer {
  #openShards
  #inShard
  #writing
  #room
  #enabled
  #idleMs
  #yieldMs
  #now
  #running
  #timer
  #outlasted // the writing() value whose writes outlasted a wait
  #stopped = false
  #then // the lowest a start asked for during a run: the next run's target
  #grown = false // dead bytes grew since noteWrite() last summed them

  // openShards(): the open Shard objects; inShard(index, fn, { admitted }): runs
  // fn(shard) holding it (Shards#inShard); writing(): falsy when the store has no write in progress, else a value that stays
  // the same until it has none again; room(piece): whether the disk has room to compact
  // a piece of a plan (Shards#roomToCompact). idleMs, yieldMs, now (the clock): for tests.
  constructor ({ openShards, inShard, writing = () => false, room = async () => true, enabled = true, idleMs = IDLE_MS, yieldMs = YIELD_MS, now = Date.now }) {
    this.#openShards = openShards
    this.#inShard = inShard
    this.#writing = writing
    this.#room = room
    this.#enabled = enabled
    this.#idleMs = idleMs
    this.#yieldMs = yieldMs
    this.#now = now
  }

  // Called whenever a shard's dead bytes grew: what is dead is reclaimed once removals
  // pause (or, past RECLAIM_AT, when a write begins).
  noteDead () {
    if (!this.#enabled || this.#stopped) return
    this.#grown = true
    clearTimeout(this.#timer)
    this.#timer = setTimeout(() => this.#start(0), this.#idleMs)
    this.#timer.unref() // never keeps a process alive: notes left are reclaimed next time
  }

  // Called whenever a write begins: past RECLAIM_AT, reclaiming starts at once, so
  // that the store's directory does not grow with dead data. The open shards' dead
  // bytes are summed only if they grew since the last sum: not for every small file.
  noteWrite () {
    if (!this.#enabled || this.#stopped || this.#running || !this.#grown) return
    this.#grown = false
    if (this.#deadBytes() >= RECLAIM_AT) this.#start(RECLAIM_DOWN_TO)
  }

  #deadBytes () {
    let sum = 0
    for (const shard of this.#openShards()) sum += shard.reclaimable
    return sum
  }

  // A start asked for while a run is in progress runs after it, down to the lower of
  // what was asked meanwhile.
  #start (downTo) {
    if (this.#stopped) return
    if (this.#running) {
      this.#then = Math.min(this.#then ?? Infinity, downTo)
      return
    }
    this.#running = this.#run(downTo).catch(() => {}).finally(() => {
      this.#running = undefined
      const then = this.#then
      this.#then = undefined
      if (then !== undefined) this.#start(then)
    })
  }

  async #run (downTo, lease = {}) {
    while (!this.#stopped && this.#deadBytes() > downTo) {
      let most
      for (const shard of this.#openShards()) if (shard.reclaimable > 0 && (!most || shard.reclaimable > most.reclaimable)) most = shard
      if (!most) return
      const plan = await this.#inShard(most.index, (shard) => shard.reclaimPlan(), lease)
      for (const piece of plan.pieces) {
        await this.#writesFirst()
        if (this.#stopped) return
        await this.#inShard(most.index, async (shard) => {
          if (!(await this.#room(piece))) throw noRoom(shard)
          await shard.compactPiece(piece)
        }, lease)
      }
      await this.#inShard(most.index, (shard) => shard.forgetDead(plan), lease)
    }
  }

  async #writesFirst () {
    const until = this.#now() + this.#yieldMs
    for (let busy = this.#writing(); busy && busy !== this.#outlasted; busy = this.#writing()) {
      if (this.#stopped || this.#deadBytes() >= RECLAIM_NOW) return
      if (this.#now() >= until) {
        this.#outlasted = busy
        return
      }
      await new Promise((resolve) => setTimeout(resolve, POLL_MS))
    }
  }

  // Reclaims now whatever the open shards have noted, after any work in progress, even
  // with reclaiming in the background turned off; rejects with the first failure (a
  // full disk), whose notes are left for the next try.
  // Its leases are admitted (lib/shard/shards.js): called before close(), it stops
  // quietly at the next piece instead of failing with ECLOSED.
  async reclaimNow () {
    while (this.#running) await this.#running
    const run = this.#run(0, { admitted: true })
    this.#running = run.catch(() => {}).finally(() => {
      this.#running = undefined
    })
    return run
  }

  // No new work starts; resolves once the work in progress is done.
  stop () {
    this.#stopped = true
    clearTimeout(this.#timer)
    return this.#running || Promise.resolve()
  }
}

function noRoom (shard) {
  return errors.diskFull(`shard ${shard.name}`, 'no room to reclaim removed files\' space besides the disk reserve; compact() may use the reserve', { shard: shard.index })
}

module.exports = { Reclaimer }

'use strict'

const errors = require('../api/errors')

// Dead bytes (removed versions not compacted away) in the open shards past which a write
// starts reclaiming at once: the directory holds little more than live data plus this.
// Removals alone take no more disk: a burst of them is reclaimed once it pauses.
const RECLAIM_AT = 256 * 1024 * 1024
const RECLAIM_DOWN_TO = 64 * 1024 * 1024 // reclaiming at once goes on down to this
const IDLE_MS = 2000 // without a new removal: whatever is left is reclaimed
// Before each piece, reclaiming waits for writes in progress, but no longer than this:
// past it, pieces go on alongside them, keeping pace with a steady writer.
const YIELD_MS = 100
const POLL_MS = 10
// Dead bytes past which reclaiming no longer waits for writes.
const RECLAIM_NOW = 1024 * 1024 * 1024

// Gives the space of unlinked and overwritten files back in the background, one shard
// at a time (LevelDB runs a process's compactions on one thread), most dead bytes first,
// in pieces (Shard.reclaimPlan). Writes go first: a compaction on LevelDB's background
// thread delays every shard's memtable flushes. A shard is held only while a piece is
// compacted; closed shards keep their notes until opened again. Failures (a full disk,
// or no room for a piece besides the disk reserve: ENOSPC) are left for the next try.
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

  // inShard: Shards#inShard. writing(): falsy without a write in progress, else a value
  // that stays the same until there is none. room(piece): Shards#roomToCompact.
  // idleMs, yieldMs, now (the clock): for tests.
  constructor ({ openShards, inShard, writing = () => false, room = async () => true, enabled = true, idleMs = IDLE_MS, yieldMs = YIELD_MS, now = Date.now }) {
    this.#openShards = openShards
    this.#inShard = inShard
    this.#writing = writing
    this.#room = room
    this.#enabled = enabled
    this.#idleMs = idleMs
    this.#yieldMs = yieldMs
    this.#now = now
    this.runs = 0 // runs that found removed versions' space to give back
    this.pieces = 0 // key ranges compacted to give it back
  }

  // A shard's dead bytes grew: reclaimed once removals pause (or past RECLAIM_AT, at a write).
  noteDead () {
    if (!this.#enabled || this.#stopped) return
    this.#grown = true
    clearTimeout(this.#timer)
    this.#timer = setTimeout(() => this.#start(0), this.#idleMs)
    this.#timer.unref() // never keeps a process alive: notes left are reclaimed next time
  }

  // A write begins: past RECLAIM_AT, reclaiming starts at once. Dead bytes are summed
  // only if they grew since the last sum.
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

  // A start asked for during a run runs after it, down to the lowest asked meanwhile.
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
    if (!this.#stopped && this.#deadBytes() > downTo) this.runs++
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
        this.pieces++
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

  // Reclaims what the open shards noted, after any work in progress, even with the
  // background off; rejects with the first failure, whose notes are left. Its leases are
  // admitted: called before close(), it stops at the next piece instead of ECLOSED.
  async reclaimNow () {
    while (this.#running) await this.#running
    const run = this.#run(0, { admitted: true })
    this.#running = run.catch(() => {}).finally(() => {
      this.#running = undefined
    })
    return run
  }

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

'use strict'

// Dead bytes (removed versions not yet compacted away) in the open shards of a store
// that start reclaiming at once: the store's directory never holds much more than its
// live data plus this.
const RECLAIM_AT = 256 * 1024 * 1024
// Reclaiming at once goes on until this much is left.
const RECLAIM_DOWN_TO = 64 * 1024 * 1024
// After this long without a new removal, whatever is left is reclaimed.
const IDLE_MS = 2000

// Gives the space of unlinked and overwritten files back in the background, one shard
// at a time (LevelDB runs every compaction of a process on one thread anyway): the
// shard with the most dead bytes first. Shards that are closed keep their notes and
// are reclaimed once opened again. Failures (a full disk) are left for the next try.
class Reclaimer {
  #openShards
  #inShard
  #enabled
  #running
  #timer
  #stopped = false

  // openShards(): the open Shard objects; inShard(index, fn): runs fn(shard) holding it.
  constructor ({ openShards, inShard, enabled = true }) {
    this.#openShards = openShards
    this.#inShard = inShard
    this.#enabled = enabled
  }

  // Called whenever a shard's dead bytes grew.
  noteDead () {
    if (!this.#enabled || this.#stopped) return
    if (this.#deadBytes() >= RECLAIM_AT) {
      this.#start(RECLAIM_DOWN_TO)
      return
    }
    clearTimeout(this.#timer)
    this.#timer = setTimeout(() => this.#start(0), IDLE_MS)
    this.#timer.unref() // never keeps a process alive: notes left are reclaimed next time
  }

  #deadBytes () {
    let sum = 0
    for (const shard of this.#openShards()) sum += shard.dead
    return sum
  }

  #start (downTo) {
    if (this.#running || this.#stopped) return
    this.#running = this.#run(downTo).catch(() => {}).finally(() => {
      this.#running = undefined
    })
  }

  async #run (downTo) {
    while (!this.#stopped && this.#deadBytes() > downTo) {
      let most
      for (const shard of this.#openShards()) if (shard.dead > 0 && (!most || shard.dead > most.dead)) most = shard
      if (!most) return
      await this.#inShard(most.index, (shard) => shard.reclaim())
    }
  }

  // No new work starts; resolves once the work in progress is done.
  stop () {
    this.#stopped = true
    clearTimeout(this.#timer)
    return this.#running || Promise.resolve()
  }
}

module.exports = { Reclaimer }

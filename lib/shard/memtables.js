'use strict'

// LevelDB keeps what was written to a database since its last flush in memory (its
// memtables: one filling, one being written out, each up to writeBufferSize), and
// nothing bounds them across databases: 256 shards written evenly hold 256 growing
// memtables. The store's memory budget does. Once LevelDB's estimate for the open
// shards (memtables and block caches) plus what `others()` reports (the store's
// writers and readers) passes `limit`, the shards holding the most are flushed, and a
// write waits while a flush it would add to is in flight. The shards being written
// keep LevelDB's full memtable; idle ones give theirs up first, being the fullest.
// One flush takes a memtable switch, a table written and synced, and a manifest
// record synced: a memtable smaller than MIN_FLUSH is not worth it.
const MIN_FLUSH = 64 * 1024

class Memtables {
  #limit
  #others
  #cacheEach // bytes of a shard's estimate that are its block cache, which no flush frees
  #held = new Map() // shard -> LevelDB's estimate of its memory, as last read
  #total = 0
  #flushing = new Map() // shard -> its flush in flight (settles, never rejects)
  #failed = new Set() // shards whose last flush failed: not flushed again before a write
  #changed // a promise settled when a flush ends or a shard leaves, made on demand
  #wake = () => {}

  constructor ({ limit, cacheEach = 0, others = () => 0 }) {
    this.#limit = limit
    this.#cacheEach = cacheEach
    this.#others = others
    this.flushes = 0 // flushes started for the budget
  }

  // LevelDB's estimate for the open shards, as last read.
  get total () {
    return this.#total
  }

  // A shard now open: its memory counts from now on.
  add (shard) {
    this.#read(shard)
    this.#relieve()
  }

  // A shard closing: closing frees its memory.
  remove (shard) {
    if (!this.#held.has(shard)) return
    this.#total -= this.#held.get(shard)
    this.#held.delete(shard)
    this.#failed.delete(shard)
    this.#notify()
  }

  // After a write to `shard`: its memory as LevelDB now says, and flushes started if
  // the budget is passed.
  wrote (shard) {
    if (!this.#held.has(shard)) return
    this.#failed.delete(shard)
    this.#read(shard)
    this.#relieve()
  }

  // Resolves once a write may add to the memtables: at once while under the budget,
  // else once the flushes in flight brought it back under, or all ended (a flush
  // cannot help then: what the budget holds is the writers' and readers'). Never
  // waits for anything but a flush, which LevelDB always ends.
  async room () {
    while (this.#over(0) && this.#flushing.size > 0) {
      if (!this.#changed) this.#changed = new Promise((resolve) => { this.#wake = resolve })
      await this.#changed
    }
  }

  #notify () {
    const wake = this.#wake
    this.#changed = undefined
    this.#wake = () => {}
    wake()
  }

  #over (leaving) {
    return this.#total - leaving + this.#others() > this.#limit
  }

  // Starts flushes, fullest first, until what is left once they end fits the budget.
  #relieve () {
    if (!this.#over(0)) return
    let leaving = 0
    for (const shard of this.#flushing.keys()) leaving += this.#held.get(shard) || 0
    while (this.#over(leaving)) {
      const fullest = this.#fullest()
      if (!fullest) return
      // LevelDB may have flushed it itself since it was last read.
      const before = this.#held.get(fullest)
      if (this.#read(fullest) < before) continue
      leaving += this.#held.get(fullest)
      this.#flush(fullest)
    }
  }

  #fullest () {
    let fullest
    let most = MIN_FLUSH + this.#cacheEach
    for (const [shard, bytes] of this.#held) {
      if (bytes >= most && !this.#flushing.has(shard) && !this.#failed.has(shard)) {
        fullest = shard
        most = bytes
      }
    }
    return fullest
  }

  #read (shard) {
    const bytes = shard.db.memoryUsage()
    this.#total += bytes - (this.#held.get(shard) || 0)
    this.#held.set(shard, bytes)
    return bytes
  }

  #flush (shard) {
    this.flushes++
    // A flush fails when the shard closed meanwhile (its memory is gone with it) or
    // LevelDB keeps a failed write (a full disk): the shard's next write reports it, and
    // until that write the shard is not flushed again.
    const done = shard.db.flush().catch(() => this.#failed.add(shard)).then(() => {
      this.#flushing.delete(shard)
      if (this.#held.has(shard)) this.#read(shard)
      else this.#failed.delete(shard)
      this.#notify()
      this.#relieve()
    })
    this.#flushing.set(shard, done)
  }
}

module.exports = { Memtables, MIN_FLUSH }

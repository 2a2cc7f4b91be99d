'use strict'

// LevelDB keeps what was written to a database since its last flush in memory (its
// memtables: one filling, one being written out, each up to writeBufferSize), and
// nothing bounds them across databases: 256 shards written evenly hold 256 growing
// memtables. The store's memory budget does. LevelDB's estimate for the open shards
// (memtables and block caches) plus what `others()` reports (the store's writers and
// readers) is held to `limit`: past FLUSH_AT of it, shards are flushed, and past all of
// it a write waits while a flush is in flight. Flushing starts early so that a steady
// writer seldom waits for one.
//
// Idle shards go first, fullest first: a shard being written keeps LevelDB's full
// memtable unless no idle shard can give anything. One flush takes a memtable switch,
// a table written and synced, and a manifest record synced, all on LevelDB's one
// background thread, which also runs every shard's own flushes and compactions: at
// most MAX_FLUSHING are asked for at a time (one running, one queued), so that a
// shard being written, whose own flush queues behind them, does not wait for many. A
// memtable smaller than MIN_FLUSH is not worth a flush.
const FLUSH_AT = 0.75
const MAX_FLUSHING = 2
const MIN_FLUSH = 64 * 1024

class Memtables {
  #limit
  #others
  #cacheEach // bytes of a shard's estimate that are its block cache, which no flush frees
  #held = new Map() // shard -> LevelDB's estimate of its memory, as last read
  #total = 0
  #flushing = new Map() // shard -> its flush in flight (settles, never rejects)
  #failed = new Set() // shards whose last flush failed: not flushed again before a write
  #writing = new Map() // shard -> its batches in flight
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

  // Resolves once a batch may go to `shard`'s memtable: at once while under the
  // budget, else once the flushes in flight brought it back under, or all ended (a
  // flush cannot help then: what the budget holds is the writers' and readers'). Never
  // waits for anything but a flush, which LevelDB always ends. Every room() is
  // followed by one wrote(), however the batch ends.
  async room (shard) {
    while (this.#over(0, 1) && this.#flushing.size > 0) {
      if (!this.#changed) this.#changed = new Promise((resolve) => { this.#wake = resolve })
      await this.#changed
    }
    this.#writing.set(shard, (this.#writing.get(shard) || 0) + 1)
  }

  // After a batch to `shard` (`ok`: written): its memory as LevelDB now says, and
  // flushes started if the budget asks for them.
  wrote (shard, ok = true) {
    const writing = this.#writing.get(shard) - 1
    if (writing > 0) this.#writing.set(shard, writing)
    else this.#writing.delete(shard)
    if (!this.#held.has(shard)) return
    if (ok) this.#failed.delete(shard)
    this.#read(shard)
    this.#relieve()
  }

  #notify () {
    const wake = this.#wake
    this.#changed = undefined
    this.#wake = () => {}
    wake()
  }

  // Whether what is held, less `leaving` (flushes in flight), passes `share` of the budget.
  #over (leaving, share) {
    return this.#total - leaving + this.#others() > share * this.#limit
  }

  // Starts flushes until what is left once they end is back under FLUSH_AT.
  #relieve () {
    if (!this.#over(0, FLUSH_AT)) return
    let leaving = 0
    for (const shard of this.#flushing.keys()) leaving += this.#held.get(shard) || 0
    while (this.#flushing.size < MAX_FLUSHING && this.#over(leaving, FLUSH_AT)) {
      const fullest = this.#fullest()
      if (!fullest) return
      // LevelDB may have flushed it itself since it was last read.
      const before = this.#held.get(fullest)
      if (this.#read(fullest) < before) continue
      leaving += this.#held.get(fullest)
      this.#flush(fullest)
    }
  }

  // The idle shard holding the most, else the shard being written that holds the most.
  #fullest () {
    const best = { idle: undefined, written: undefined }
    const most = { idle: MIN_FLUSH + this.#cacheEach, written: MIN_FLUSH + this.#cacheEach }
    for (const [shard, bytes] of this.#held) {
      if (this.#flushing.has(shard) || this.#failed.has(shard)) continue
      const kind = this.#writing.has(shard) ? 'written' : 'idle'
      if (bytes >= most[kind]) {
        best[kind] = shard
        most[kind] = bytes
      }
    }
    return best.idle || best.written
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

module.exports = { Memtables, MIN_FLUSH, FLUSH_AT, MAX_FLUSHING }

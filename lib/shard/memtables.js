'use strict'

// LevelDB keeps what was written to a database since its last flush in memory (its
// memtables: one filling, one being written out, each up to writeBufferSize), and
// nothing bounds them across databases: 256 shards written evenly hold 256 growing
// memtables. The store's memory budget does. The memtables get what the store's
// writers and readers (`others()`) leave of `limit`, and at least a quarter of it
// (FLOOR), so that writes go on when readers hold the rest. Past FLUSH_AT of that
// allowance shards are flushed, and past all of it a write waits while a flush is in
// flight: flushing starts early so that a steady writer seldom waits for one.
//
// Idle shards go first, fullest first: a shard being written keeps LevelDB's full
// memtable unless no idle shard can give anything. One flush takes a memtable switch,
// a table written and synced, and a manifest record synced, all on LevelDB's one
// background thread, which also runs every shard's own flushes and compactions: at
// most MAX_FLUSHING are asked for at a time (one running, one queued), so that a
// shard being written, whose own flush queues behind them, does not wait for many. A
// memtable smaller than MIN_FLUSH is not worth a flush. A shard being compacted is
// not flushed: a flush asked for meanwhile would end only once the compaction does,
// holding its place among the MAX_FLUSHING all along.
//
// Once the store went QUIET_MS without a batch, its shards are flushed one at a time,
// fullest first, while it stays quiet, whatever the budget: LevelDB's thread has
// nothing else of this store's to do then, and a shard flushed before the store closes
// has nothing left for its close to write (Shard#close flushes what is left, so that
// the next open replays no log).
const FLUSH_AT = 0.75
const FLOOR = 0.25
const MAX_FLUSHING = 2
const MIN_FLUSH = 64 * 1024
const QUIET_MS = 1000

class Memtables {
  #limit
  #others
  #held = new Map() // shard -> LevelDB's estimate of its memory, as last read
  #total = 0
  #flushing = new Map() // shard -> its flush or close in flight (settles, never rejects)
  #closing = new Set() // shards whose close is in flight: counted until it ends
  #failed = new Set() // shards a flush did not empty: not flushed again before a write
  #writing = new Map() // shard -> its batches in flight
  #written = new Map() // shard -> batches to it that succeeded
  #changed // a promise settled when a wait may end, made on demand
  #wake = () => {}
  #lastBatch = 0 // performance.now() when the last batch began
  #quietTimer // armed when the last batch in flight ended, until QUIET_MS after it
  #stopped = false
  #quietMs

  constructor ({ limit, others = () => 0, quietMs = QUIET_MS }) {
    this.#limit = limit
    this.#others = others
    this.#quietMs = quietMs
    this.flushes = 0 // flushes started for the budget
    this.quietFlushes = 0 // flushes started because the store was quiet
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

  // A shard closing: `closed` settles once its close ended, which writes its memtable
  // out and closes its LevelDB. LevelDB frees the shard's memory only then, so until
  // then it stays counted as last read, and the close stands for a flush in flight: the
  // shard is not flushed for the budget, and a write past the budget waits for the
  // close to end.
  closing (shard, closed) {
    if (!this.#held.has(shard) || this.#closing.has(shard)) return
    this.#closing.add(shard)
    const flush = this.#flushing.get(shard)
    this.#flushing.set(shard, Promise.allSettled([flush, closed]).then(() => this.#remove(shard)))
  }

  #remove (shard) {
    this.#total -= this.#held.get(shard)
    for (const map of [this.#held, this.#flushing, this.#closing, this.#failed, this.#written]) map.delete(shard)
    this.#notify()
    this.#relieve()
  }

  // undefined when a batch may go to a memtable now; else a promise that resolves once
  // the flushes in flight brought the memtables back under their allowance, or all
  // ended (no flush can help then). Nothing but a flush, which LevelDB always ends, is
  // waited for. A caller that has nothing to wait for goes on without a turn of the
  // event loop: a batch built from records about to be reused is sent at once.
  wait () {
    if (!this.#mustWait()) return undefined
    return (async () => {
      while (this.#mustWait()) {
        if (!this.#changed) this.#changed = new Promise((resolve) => { this.#wake = resolve })
        await this.#changed
      }
    })()
  }

  // A batch to `shard` begins; wrote(shard, ok) follows it however it ends.
  begin (shard) {
    this.#writing.set(shard, (this.#writing.get(shard) || 0) + 1)
    this.#lastBatch = performance.now()
  }

  // After a batch to `shard` (`ok`: written): its memory as LevelDB now says, and
  // flushes started if the budget asks for them, the shard still counted as written.
  wrote (shard, ok = true) {
    if (this.#held.has(shard) && !this.#closing.has(shard)) {
      if (ok) {
        this.#failed.delete(shard)
        this.#written.set(shard, (this.#written.get(shard) || 0) + 1)
      }
      this.#read(shard)
      this.#relieve()
      if (!this.#mustWait()) this.#notify()
    }
    const writing = this.#writing.get(shard) - 1
    if (writing > 0) this.#writing.set(shard, writing)
    else this.#writing.delete(shard)
    this.#whenQuiet()
  }

  // No flush is started from now on (the store is closing).
  stop () {
    this.#stopped = true
    clearTimeout(this.#quietTimer)
  }

  // Flushes the fullest idle shard once the store went QUIET_MS without a batch and no
  // flush is in flight, then the next when that one ends, while it stays quiet.
  #whenQuiet () {
    if (this.#stopped || this.#quietTimer || this.#writing.size > 0 || this.#flushing.size > 0) return
    const left = this.#lastBatch + this.#quietMs - performance.now()
    if (left > 0) {
      this.#quietTimer = setTimeout(() => {
        this.#quietTimer = undefined
        this.#whenQuiet()
      }, left)
      this.#quietTimer.unref() // a store must never keep the process alive
      return
    }
    // LevelDB may have flushed one itself since it was last read.
    for (let fullest = this.#fullest(); fullest; fullest = this.#fullest()) {
      if (this.#read(fullest) < MIN_FLUSH) continue
      this.quietFlushes++
      return this.#flush(fullest)
    }
  }

  #mustWait () {
    return this.#flushing.size > 0 && this.#total > this.#allowance()
  }

  // What the memtables may hold now.
  #allowance () {
    return Math.max(this.#limit - this.#others(), FLOOR * this.#limit)
  }

  // Wakes the waits, if any.
  #notify () {
    if (!this.#changed) return
    const wake = this.#wake
    this.#changed = undefined
    this.#wake = () => {}
    wake()
  }

  // Starts flushes until what is left once they end is back under FLUSH_AT of the
  // allowance.
  #relieve () {
    const target = FLUSH_AT * this.#allowance()
    if (this.#total <= target) return
    let leaving = 0
    for (const shard of this.#flushing.keys()) leaving += this.#held.get(shard) || 0
    while (this.#flushing.size < MAX_FLUSHING && this.#total - leaving > target) {
      const fullest = this.#fullest()
      if (!fullest) return
      // LevelDB may have flushed it itself since it was last read.
      const before = this.#held.get(fullest)
      if (this.#read(fullest) < before) continue
      leaving += this.#held.get(fullest)
      this.flushes++
      this.#flush(fullest)
    }
  }

  // The idle shard holding the most, else the shard being written (a batch in flight,
  // or a file being written to it: Shard#writing) that holds the most.
  #fullest () {
    const best = { idle: undefined, written: undefined }
    const most = { idle: MIN_FLUSH, written: MIN_FLUSH }
    for (const [shard, bytes] of this.#held) {
      if (this.#flushing.has(shard) || this.#failed.has(shard) || shard.db.failed || shard.compacting > 0) continue
      const kind = this.#writing.has(shard) || shard.writing?.size > 0 ? 'written' : 'idle'
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

  // LevelDB's CompactRange reports no error: a shard whose LevelDB keeps a failed
  // write (a full disk) returns from it at once, its memtable still full. A flush that
  // failed, or freed nothing while no batch to the shard succeeded,
  // marks the shard: it is not flushed again before a batch to it succeeds, which
  // LevelDB refuses until it is reopened.
  #flush (shard) {
    const before = this.#held.get(shard)
    const written = this.#written.get(shard)
    const done = shard.db.flush().then(() => true, () => false).then((flushed) => {
      if (this.#closing.has(shard)) return // counted until its close ends (closing())
      this.#flushing.delete(shard)
      const freedNothing = this.#read(shard) >= before && this.#written.get(shard) === written
      if (!flushed || freedNothing || shard.db.failed) this.#failed.add(shard)
      this.#notify()
      this.#relieve()
      this.#whenQuiet()
    })
    this.#flushing.set(shard, done)
  }
}

module.exports = { Memtables, MIN_FLUSH, FLUSH_AT, FLOOR, MAX_FLUSHING }

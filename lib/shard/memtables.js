'use strict'

// LevelDB's memtables of every open shard, held to the store's memory budget: they get what its
// writers and readers (`others()`) leave of `limit`, and at least FLOOR of it. Past FLUSH_AT of
// that allowance shards are flushed, and past all of it a batch waits while a flush is in flight:
// flushing starts early so that a steady writer seldom waits. Idle shards go first, fullest first.
// Flushes run on LevelDB's one background thread, behind every shard's own flushes and compactions:
// at most MAX_FLUSHING are asked for at a time, so that a shard being written, whose own flush
// queues behind them, does not wait for many. A shard being compacted is not flushed: its flush
// would end only with the compaction. Once the store went QUIET_MS without a batch, its shards are
// flushed one at a time, fullest first, whatever the budget: LevelDB's thread has nothing else of
// the store's to do, and a shard's close is left less to write.
const FLUSH_AT = 0.75
const FLOOR = 0.25
const MAX_FLUSHING = 2
const MIN_FLUSH = 64 * 1024
const QUIET_MS = 1000

class Memtables {
  #limit
  #others
  #quietMs
  #shards = new Map() // shard -> its entry (add()): all the budget knows of an open shard
  #total = 0 // the entries' bytes summed: changed only by #read() and a close's end
  #inFlight = new Set() // the entries whose flush or close is in flight: changed only by #setFlush()
  #under // { promise, resolve } while batches wait: settled once a batch's end finds room (wrote())
  #batches = 0 // batches in flight, to any shard
  #lastBatch = 0 // performance.now() when the last batch began
  #quietTimer // armed when the last batch in flight ended, until QUIET_MS after it
  #stopped = false

  constructor ({ limit, others = () => 0, quietMs = QUIET_MS }) {
    this.#limit = limit
    this.#others = others
    this.#quietMs = quietMs
    this.flushes = 0 // flushes started for the budget
    this.quietFlushes = 0 // flushes started because the store was quiet
  }

  // LevelDB's estimate of the open shards' memory, as last read.
  get total () {
    return this.#total
  }

  add (shard) {
    if (this.#shards.has(shard)) return
    const entry = {
      shard,
      bytes: 0, // LevelDB's estimate of its memory, as last read
      flush: undefined, // its flush or close in flight: a promise that never rejects
      closing: false, // counted until its close ends, as a flush in flight
      stuck: false, // a flush did not empty it: not flushed again before a batch to it succeeds
      batches: 0, // batches to it in flight
      written: 0 // batches to it that succeeded
    }
    this.#shards.set(shard, entry)
    this.#read(entry)
    this.#relieve()
  }

  // `closed` settles once the shard's close ended; LevelDB frees its memory only then, so it
  // counts until then, its close as a flush in flight.
  closing (shard, closed) {
    const entry = this.#shards.get(shard)
    if (!entry || entry.closing) return
    entry.closing = true
    this.#setFlush(entry, Promise.allSettled([entry.flush, closed]).then(() => {
      this.#setFlush(entry, undefined)
      this.#total -= entry.bytes
      this.#shards.delete(shard)
      this.#relieve()
    }))
  }

  // Resolves once a batch may go to a memtable: at once unless the memtables are past their
  // allowance while a flush is in flight, else once they are back under it (seen as a flush
  // ends, or as a batch ends: LevelDB flushes on its own too) or no flush is in flight.
  // Flushes, which LevelDB always ends, bound every wait.
  async wait () {
    while (this.#mustWait()) await Promise.race([this.#underAgain(), ...[...this.#inFlight].map((entry) => entry.flush)])
  }

  #underAgain () {
    if (!this.#under) {
      let resolve
      const promise = new Promise((resolve_) => { resolve = resolve_ })
      this.#under = { promise, resolve }
    }
    return this.#under.promise
  }

  // A batch to `shard` begins; wrote(shard, ok) follows however it ends.
  begin (shard) {
    const entry = this.#shards.get(shard)
    if (entry) entry.batches++
    this.#batches++
    this.#lastBatch = performance.now()
  }

  // After a batch to `shard` (`ok`: written): flushes started if the budget asks for them, the
  // shard still counted as being written.
  wrote (shard, ok = true) {
    const entry = this.#shards.get(shard)
    if (entry && !entry.closing) {
      if (ok) {
        entry.stuck = false
        entry.written++
      }
      this.#read(entry)
      this.#relieve()
    }
    if (entry) entry.batches--
    this.#batches--
    if (this.#under && !this.#mustWait()) {
      this.#under.resolve()
      this.#under = undefined
    }
    this.#whenQuiet()
  }

  // The store is closing: no flush is started from now on.
  stop () {
    this.#stopped = true
    clearTimeout(this.#quietTimer)
  }

  // Once the store went QUIET_MS without a batch and no flush is in flight, flushes the fullest
  // shard, then the next when that one ends.
  #whenQuiet () {
    if (this.#stopped || this.#quietTimer || this.#batches > 0 || this.#inFlight.size > 0) return
    const left = this.#lastBatch + this.#quietMs - performance.now()
    if (left > 0) {
      this.#quietTimer = setTimeout(() => {
        this.#quietTimer = undefined
        this.#whenQuiet()
      }, left)
      this.#quietTimer.unref()
      return
    }
    for (let fullest = this.#fullest(); fullest; fullest = this.#fullest()) {
      if (this.#read(fullest) < MIN_FLUSH) continue // LevelDB flushed it itself
      this.quietFlushes++
      return this.#flush(fullest)
    }
  }

  #mustWait () {
    return this.#inFlight.size > 0 && this.#total > this.#allowance()
  }

  #allowance () {
    return Math.max(this.#limit - this.#others(), FLOOR * this.#limit)
  }

  // Starts flushes until what stays once those in flight end is back under FLUSH_AT of the
  // allowance.
  #relieve () {
    const target = FLUSH_AT * this.#allowance()
    while (this.#notFlushing() > target && this.#inFlight.size < MAX_FLUSHING) {
      const fullest = this.#fullest()
      if (!fullest) return
      const before = fullest.bytes
      if (this.#read(fullest) < before) continue // LevelDB flushed some of it itself
      this.flushes++
      this.#flush(fullest)
    }
  }

  // The idle shard holding the most, else the shard being written (a batch in flight, or a
  // file being written to it: Shard#writing) that holds the most.
  #fullest () {
    const best = { idle: undefined, written: undefined }
    const most = { idle: MIN_FLUSH, written: MIN_FLUSH }
    for (const entry of this.#shards.values()) {
      const { shard } = entry
      if (entry.flush || entry.stuck || shard.db.failed || shard.compacting > 0) continue
      const kind = entry.batches > 0 || shard.writing?.size > 0 ? 'written' : 'idle'
      if (entry.bytes >= most[kind]) {
        best[kind] = entry
        most[kind] = entry.bytes
      }
    }
    return best.idle || best.written
  }

  // What stays once the flushes and closes in flight end.
  #notFlushing () {
    let bytes = this.#total
    for (const entry of this.#inFlight) bytes -= entry.bytes
    return bytes
  }

  #read (entry) {
    const bytes = entry.shard.db.memoryUsage()
    this.#total += bytes - entry.bytes
    entry.bytes = bytes
    return bytes
  }

  #setFlush (entry, flush) {
    entry.flush = flush
    if (flush) this.#inFlight.add(entry)
    else this.#inFlight.delete(entry)
  }

  // LevelDB's CompactRange reports no error: one whose LevelDB keeps a failed write (a full disk)
  // returns at once, its memtable still full. A flush that failed, or freed nothing while no
  // batch to the shard succeeded, leaves the shard stuck until a batch to it succeeds.
  #flush (entry) {
    const { shard } = entry
    const before = entry.bytes
    const written = entry.written
    this.#setFlush(entry, shard.db.flush().then(() => true, () => false).then((flushed) => {
      if (entry.closing) return // its close ends its flush (closing())
      this.#setFlush(entry, undefined)
      const freedNothing = this.#read(entry) >= before && entry.written === written
      if (!flushed || freedNothing || shard.db.failed) entry.stuck = true
      this.#relieve()
      this.#whenQuiet()
    }))
  }
}

module.exports = { Memtables, MIN_FLUSH, FLUSH_AT, FLOOR, MAX_FLUSHING }

'use strict'

// setTimeout's longest delay: a later expiry is waited for in steps.
const MAX_DELAY = 0x7fffffff
// After a shard's collection failed (a full disk, the shard busy or damaged), its next try;
// each failure after doubles the wait, up to MAX_RETRY_MS, until it is noted again (opened,
// repaired) or a collection of it succeeds.
const RETRY_MS = 10 * 1000
const MAX_RETRY_MS = 10 * 60 * 1000
// Shards collected at once: each is its own LevelDB, and one collection's reads and batch
// overlap another's on libuv's threads, so that collecting keeps pace with uploads.
const COLLECT_SHARDS = 4

// Removes expired files in the background, with no call from the user: one timer, never
// keeping the process alive, set for the earliest expiry over the shards, open ones
// (Shard#nextExpiry) and closed ones (their figures in the usage cache, `closedExpiries()`:
// [[index, time]]). When it fires, each shard with files due is leased (opened if closed)
// and collected in batches (Shard#collectExpired); their space goes to the Reclaimer as
// dead bytes, like an unlink's. The same timer empties the trash as it turns old enough
// (Shard#nextDue; `emptyTrash(index, now)`, maintenance/trash.js). now (the clock): for tests.
class Collector {
  #openShards
  #closedExpiries
  #inShard
  #emptyTrash
  #enabled
  #now
  #timer
  #at // the time the timer is set for
  #running
  #stopped = false
  #noted = new Map() // index -> time: shards noted, which the pool may not list as open yet
  #retries = new Map() // index -> { wait, at }: shards whose collection failed, not tried before `at`

  constructor ({ openShards, closedExpiries = () => [], inShard, emptyTrash = async () => 0, enabled = true, now = Date.now }) {
    this.#openShards = openShards
    this.#closedExpiries = closedExpiries
    this.#inShard = inShard
    this.#emptyTrash = emptyTrash
    this.#enabled = enabled
    this.#now = now
    this.runs = 0 // collections that removed files
    this.files = 0 // expired files removed
    this.trashFiles = 0 // files in the trash removed
  }

  // The store's collector (store/local.js), told of every shard with work due: open ones
  // as their nextDue comes sooner, closed ones from the usage cache (closedDue), and
  // those without trusted figures there (the last process died with them open, or could
  // not record them at their close), which may hold files due that nothing here knows
  // of, even without openAhead: their earliest expiry is read from their files, left
  // closed, or where they cannot be read so they are due now, and a collection opens them
  // to read their index. `trash`: the store's (maintenance/trash.js).
  static forStore ({ shards, usage, trash, enabled }) {
    const collector = new Collector({
      openShards: () => shards.openShards(),
      closedExpiries: () => closedDue(usage, trash),
      inShard: (index, fn) => shards.inShard(index, fn),
      emptyTrash: (index, now) => trash.emptyDue(index, now),
      enabled
    })
    shards.onExpiry = (shard) => collector.note(shard.index, shard.nextDue)
    for (const [index, time] of closedDue(usage, trash)) collector.note(index, time)
    for (const index of shards.indices()) {
      if (usage.get(index)) continue
      shards.closedFirstExpiry(index).then((time) => collector.note(index, time), () => collector.note(index, Date.now()))
    }
    return collector
  }

  // Closed shard `index`'s work due, as the usage cache has it now (after a repair).
  noteClosed (index) {
    for (const [i, time] of this.#closedExpiries()) if (i === index) this.note(i, time)
  }

  // Shard `index`'s earliest expiry, or trash to empty, is `time` (it opened, or a write
  // came sooner).
  note (index, time) {
    if (!this.#enabled || this.#stopped || time === undefined) return
    this.#noted.set(index, time)
    this.#retries.delete(index)
    if (this.#running || (this.#at !== undefined && this.#at <= time)) return
    this.#arm(time)
  }

  #arm (time) {
    clearTimeout(this.#timer)
    this.#at = time
    this.#timer = setTimeout(() => this.#start(), Math.min(MAX_DELAY, Math.max(0, time - this.#now())))
    this.#timer.unref() // never keeps a process alive: files left are collected next time
  }

  // Every expiry known, by when its shard is due, soonest first: [[index, time, due]],
  // `due` the time, or later a failed shard's next try.
  #expiries () {
    const times = new Map([...this.#closedExpiries(), ...this.#noted])
    // An open shard's own figure overrides what was noted, and is kept for after it closes.
    for (const shard of this.#openShards()) {
      // nextDue: its expiry or trash, whichever is first; nextExpiry, of a shard without trash.
      const due = shard.nextDue ?? shard.nextExpiry
      if (due === undefined) {
        times.delete(shard.index)
        this.#noted.delete(shard.index)
      } else {
        times.set(shard.index, due)
        this.#noted.set(shard.index, due)
      }
    }
    const due = (index, time) => Math.max(time, this.#retries.has(index) ? this.#retries.get(index).at : time)
    return [...times].map(([index, time]) => [index, time, due(index, time)]).sort((a, b) => a[2] - b[2])
  }

  #failed (index, now) {
    const last = this.#retries.get(index)
    const wait = last ? Math.min(MAX_RETRY_MS, last.wait * 2) : RETRY_MS
    this.#retries.set(index, { wait, at: now + wait })
  }

  #start () {
    this.#at = undefined
    if (this.#stopped || this.#running) return
    this.#running = this.collectNow().catch(() => {}).finally(() => {
      this.#running = undefined
      const [next] = this.#expiries()
      if (next && !this.#stopped) this.#arm(next[2])
    })
  }

  // Collects every shard with files due now, COLLECT_SHARDS at a time; rejects with the
  // first failure, after trying the others. A shard that failed is tried again once its
  // wait passed.
  async collectNow () {
    const now = this.#now()
    const due = this.#expiries().filter(([, , at]) => at <= now)
    let files = 0
    let failure
    let next = 0
    const worker = async () => {
      while (next < due.length && !this.#stopped) {
        const [index, time] = due[next++]
        try {
          const removed = await this.#collectShard(index, now) // not `files += await`: the workers' sums would overwrite one another
          files += removed
          if (this.#noted.get(index) === time) this.#noted.delete(index) // open: its nextExpiry says the rest
          this.#retries.delete(index)
        } catch (err) {
          this.#failed(index, now)
          failure = failure || err
        }
      }
    }
    await Promise.all(Array.from({ length: Math.min(COLLECT_SHARDS, due.length) }, worker))
    if (files > 0) this.runs++
    if (failure) throw failure
    return files
  }

  // Shard `index`'s files due at `now`, batch after batch, then its trash due. Resolves to
  // the expired files it removed, counted as each batch is made (a pass over many shards
  // takes a while).
  async #collectShard (index, now) {
    let files = 0
    for (let more = true; more && !this.#stopped;) {
      const done = await this.#inShard(index, (shard) => shard.collectExpired(now))
      files += done.files
      this.files += done.files
      more = done.more
    }
    if (!this.#stopped) {
      const emptied = await this.#emptyTrash(index, now)
      this.trashFiles += emptied
    }
    return files
  }

  stop () {
    this.#stopped = true
    clearTimeout(this.#timer)
    return this.#running || Promise.resolve()
  }
}

// [[index, time]]: when each closed shard next has work for the Collector, the earlier of
// its first expiry and its trash turning trashDays old.
function closedDue (usage, trash) {
  const due = new Map()
  for (const [index, time] of [...usage.expiries(), ...trash.closedDue(usage.closedFigures())]) {
    if (!(due.get(index) <= time)) due.set(index, time)
  }
  return [...due]
}

module.exports = { Collector }

'use strict'

const DAY_MS = 24 * 60 * 60 * 1000

// The store's trash (doc/format.md, "Trash"): a file is in it while its trash time, in its
// head and metadata, is later than the store's restore time, kept in the usage cache's
// state. So a restore is one synced write, and no file is written. Restores and emptyings
// run one at a time: an emptying never removes a file a restore resolved to bring back.
// Also the clock the shards read (Shard#clock): restoredAt, and trashMs, how long a file
// stays in the trash before the Collector empties it.
class Trash {
  #usage
  #lock = Promise.resolve()
  #lastTime = 0 // the latest trash time given out: a restore comes after it

  constructor ({ usage, days }) {
    this.#usage = usage
    this.trashMs = days * DAY_MS
    this.shards = undefined // the store's Shards, set once made (they read this clock)
  }

  get restoredAt () {
    return this.#usage.restoredAt
  }

  // The time to mark a file trashed: after the last restore, whatever the system clock did.
  time () {
    this.#lastTime = Math.max(Date.now(), this.restoredAt + 1, this.#lastTime)
    return this.#lastTime
  }

  #locked (fn) {
    const run = this.#lock.then(fn)
    this.#lock = run.catch(() => {})
    return run
  }

  // Brings back every file in the trash: resolves to { files, bytes } once the new restore
  // time is synced.
  restore () {
    return this.#locked(async () => {
      const sums = { files: 0, bytes: 0 }
      // After every trash time, those an earlier process gave out on a clock ahead of now's.
      let latest = Math.max(Date.now(), this.restoredAt + 1, this.#lastTime)
      for (const index of this.shards.indices()) {
        const { files, bytes, last } = await this.shards.trashIn(index)
        sums.files += files
        sums.bytes += bytes
        if (last > latest) latest = last
      }
      await this.#usage.restored(latest)
      return sums
    })
  }

  // Removes for good the files trashed before `before` (ms; undefined: all), in synced
  // batches: resolves to { files, bytes } once all are.
  empty (before) {
    return this.#locked(async () => {
      const sums = { files: 0, bytes: 0 }
      for (const index of this.shards.indices()) {
        if ((await this.shards.trashIn(index)).files === 0) continue
        const { files, bytes } = await this.#emptyShard(index, before)
        sums.files += files
        sums.bytes += bytes
      }
      return sums
    })
  }

  // The Collector's part: shard `index`'s files in the trash trashMs or longer at `now`.
  // Resolves to the number removed. A shard whose earliest trash time is later is not
  // leased nor scanned: the collector asks after every shard it collects.
  emptyDue (index, now) {
    if (!Number.isFinite(this.trashMs)) return Promise.resolve(0)
    const before = now - this.trashMs + 1
    return this.#locked(async () => {
      const { first } = await this.shards.trashIn(index)
      return first !== undefined && first < before ? (await this.#emptyShard(index, before)).files : 0
    })
  }

  async #emptyShard (index, before) {
    const sums = { files: 0, bytes: 0 }
    for (let more = true; more;) {
      const done = await this.shards.inShard(index, (shard) => shard.emptyTrash(this.restoredAt, before))
      sums.files += done.files
      sums.bytes += done.bytes
      more = done.more
    }
    return sums
  }

  // [[index, time]]: when the trash of each closed shard (`closed`: [[index, figures]] from
  // the usage cache) turns trashMs old.
  closedDue (closed) {
    const due = []
    for (const [index, figures] of closed) {
      const { first } = this.shards.trashOf(figures)
      if (first !== undefined && Number.isFinite(first + this.trashMs)) due.push([index, first + this.trashMs])
    }
    return due
  }
}

module.exports = { Trash }

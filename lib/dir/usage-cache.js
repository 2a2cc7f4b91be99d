'use strict'

const { shardName } = require('../base/shard-names')
const { retryOnce } = require('./retry')
const { madeNotDurable } = require('../leveldb/leveldb')

// Each shard's { used, files, diskBytes, dead, nextExpiry } in the `state` LevelDB, so
// usage() and metrics() need not open every shard, nor the expiry collector
// (maintenance/expiry.js) to know when a closed shard holds files due. A shard is marked
// open while it may change, and repairing during repair(): marked so at startup, its
// figures are not trusted (the last process died). Nor are figures without `dead` (a
// removed version's bytes not yet given back) or without `nextExpiry` (null: no file
// expires), which an older kfs left: the shard's next open reads them.
const USAGE = 'usage!'
const REPAIR = 'repair!'
// The store's last restoreTrash() time (maintenance/trash.js), outside the range load() scans.
const RESTORED = 'clock!restoredAt'
const usageKey = (index) => USAGE + shardName(index)
const repairKey = (index) => REPAIR + shardName(index)

// A shard's record: its figures, nextExpiry null when none (JSON drops undefined, and a
// record without it is an older kfs's).
const recordOf = (figures, open) => JSON.stringify({ ...figures, nextExpiry: figures.nextExpiry ?? null, open })

class UsageCache {
  #state
  #reopen
  #trusted // index -> figures of shards closed cleanly
  #repairing
  #marks = new Map() // index -> open mark waiting for the next batch
  #nextBatch // the batch that will write the waiting marks
  #lastBatch = Promise.resolve()
  #reopening // the reopen of a failed state, shared by the writes that met the failure

  // reopen: resolves to the state LevelDB opened again (see #write).
  constructor (state, reopen, trusted, known, repairing, restoredAt = 0) {
    this.#state = state
    this.restoredAt = restoredAt
    this.#reopen = reopen
    this.#trusted = trusted
    this.known = known // every shard ever opened: one whose directory is gone was lost
    this.#repairing = repairing
  }

  static async load (state, reopen) {
    const trusted = new Map()
    const known = new Set()
    const repairing = new Set()
    for await (const entry of state.scan({ gt: REPAIR, lt: USAGE + '\xff', keyAsBuffer: false, valueAsBuffer: false })) {
      if (entry.key.startsWith(REPAIR)) {
        repairing.add(Number(entry.key.slice(REPAIR.length)))
        continue
      }
      const index = Number(entry.key.slice(USAGE.length))
      const record = JSON.parse(entry.value)
      known.add(index)
      if (!record.open && record.dead !== undefined && record.nextExpiry !== undefined) trusted.set(index, { ...record, nextExpiry: record.nextExpiry ?? undefined })
    }
    const restored = await state.get(RESTORED)
    const restoredAt = restored === undefined ? 0 : Number(restored.toString())
    if (!Number.isSafeInteger(restoredAt) || restoredAt < 0) throw new Error(`its restore time ${JSON.stringify(restored.toString())} is not a time`)
    return new UsageCache(state, reopen, trusted, known, repairing, restoredAt)
  }

  // Keeps the store's restore time, synced: a restore resolved is never lost. Made but
  // perhaps not durable (madeNotDurable), it is still the time this process goes by.
  async restored (time) {
    try {
      await this.#write((state) => state.put(RESTORED, String(time), { sync: true }))
    } catch (err) {
      if (madeNotDurable(err)) this.restoredAt = time
      throw err
    }
    this.restoredAt = time
  }

  get (index) {
    return this.#trusted.get(index)
  }

  // [[index, time]]: the earliest expiry of each closed shard that holds files to expire.
  expiries () {
    const times = []
    for (const [index, figures] of this.#trusted) if (figures.nextExpiry !== undefined) times.push([index, figures.nextExpiry])
    return times
  }

  // [[index, figures]] of the shards closed cleanly.
  closedFigures () {
    return [...this.#trusted]
  }

  // Synced: after a power cut, changed figures must never look trusted. Shards opened at
  // once (list()) share one synced batch.
  opened (index, figures) {
    if (this.#state.readOnly) return Promise.resolve() // no shard changes: the figures stay true
    this.#trusted.delete(index)
    this.known.add(index)
    this.#marks.set(index, recordOf(figures, true))
    if (!this.#nextBatch) {
      this.#nextBatch = this.#lastBatch.catch(() => {}).then(() => {
        const ops = [...this.#marks].map(([i, value]) => ({ type: 'put', key: usageKey(i), value }))
        this.#marks.clear()
        this.#nextBatch = undefined
        return this.#write((state) => state.batch(ops, { sync: true }))
      })
      this.#lastBatch = this.#nextBatch
    }
    return this.#nextBatch
  }

  // LevelDB refuses every write after a failed background flush until reopened: the
  // state is reopened once, and writes that failed on the old one try the new one.
  #write (fn) {
    let state = this.#state
    return retryOnce(() => fn(state), async () => {
      if (this.#state === state) {
        if (!state.failed) return false
        if (!this.#reopening) {
          this.#reopening = state.close().catch(() => {}).then(() => this.#reopen()).then((reopened) => {
            this.#state = reopened
          }).finally(() => { this.#reopening = undefined })
        }
        await this.#reopening
      }
      state = this.#state
      return true
    })
  }

  close () {
    return this.#state.close()
  }

  // A record that cannot be written stays marked open: read from the shard when needed.
  async closed (index, figures) {
    // Read-only: nothing is written, and the shard did not change, so its figures are
    // true for this store (a record an older kfs or a crash left is read once, not at
    // each usage()).
    if (this.#state.readOnly) return void this.#trusted.set(index, figures)
    try {
      await this.#write((state) => state.put(usageKey(index), recordOf(figures, false)))
      this.#trusted.set(index, figures)
    } catch {
      // stays marked open: untrusted, so read from the shard when next needed
    }
  }

  isRepairing (index) {
    return this.#repairing.has(index)
  }

  // A repair a crash interrupted leaves its mark: the shard is repaired again first.
  async repairing (index) {
    this.#trusted.delete(index)
    this.#repairing.add(index)
    await this.#write((state) => state.batch([
      { type: 'put', key: repairKey(index), value: new Date().toISOString() },
      { type: 'put', key: usageKey(index), value: JSON.stringify({ used: 0, files: 0, diskBytes: 0, open: true }) }
    ], { sync: true }))
  }

  // Made but perhaps not durable: this process goes by it, and the failure is reported.
  async repaired (index, figures) {
    let failure
    await this.#write((state) => state.batch([
      { type: 'del', key: repairKey(index) },
      { type: 'put', key: usageKey(index), value: recordOf(figures, false) }
    ], { sync: true })).catch((err) => {
      if (!madeNotDurable(err)) throw err
      failure = err
    })
    this.#repairing.delete(index)
    this.known.add(index)
    this.#trusted.set(index, figures)
    if (failure) throw failure
  }
}

module.exports = { UsageCache }

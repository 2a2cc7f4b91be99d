'use strict'

const { shardName } = require('../base/shard-names')
const { retryOnce } = require('./retry')
const { madeNotDurable } = require('../leveldb/leveldb')

// Each shard's figures { used, files, diskBytes }, kept in the store's `state` LevelDB
// so usage() need not open every shard. A shard is marked open while this process may
// change it, and repairing while repair() works on it: a record still marked so at
// startup means the last process died meanwhile, so its figures are not trusted.
const USAGE = 'usage!'
const REPAIR = 'repair!'
const usageKey = (index) => USAGE + shardName(index)
const repairKey = (index) => REPAIR + shardName(index)

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
  constructor (state, reopen, trusted, known, repairing) {
    this.#state = state
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
      if (!record.open) trusted.set(index, record)
    }
    return new UsageCache(state, reopen, trusted, known, repairing)
  }

  // The figures cached when the shard last closed, unless it may have changed since.
  get (index) {
    return this.#trusted.get(index)
  }

  // Synced: after a power cut, figures that changed must never look trusted. Marks of
  // shards opened at the same time share one synced batch (list() opens many at once).
  opened (index, figures) {
    if (this.#state.readOnly) return Promise.resolve() // no shard changes: the figures stay true
    this.#trusted.delete(index)
    this.known.add(index)
    this.#marks.set(index, JSON.stringify({ ...figures, open: true }))
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

  // LevelDB refuses every write after a background flush failed (a full disk) until the
  // database is reopened; every shard open writes here, so the state is reopened once,
  // and writes that failed on the database it replaced try again on the new one.
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

  // If the record cannot be written (a full disk), it stays marked open: the figures
  // are then read from the shard the next time they are needed.
  async closed (index, figures) {
    if (this.#state.readOnly) return
    try {
      await this.#write((state) => state.put(usageKey(index), JSON.stringify({ ...figures, open: false })))
      this.#trusted.set(index, figures)
    } catch {
      // stays marked open: untrusted, so read from the shard when next needed
    }
  }

  isRepairing (index) {
    return this.#repairing.has(index)
  }

  // A repair interrupted by a crash leaves its mark: the shard must be repaired again
  // before it serves, because its chunks and accounting may be half rebuilt.
  async repairing (index) {
    this.#trusted.delete(index)
    this.#repairing.add(index)
    await this.#write((state) => state.batch([
      { type: 'put', key: repairKey(index), value: new Date().toISOString() },
      { type: 'put', key: usageKey(index), value: JSON.stringify({ used: 0, files: 0, diskBytes: 0, open: true }) }
    ], { sync: true }))
  }

  // Made but perhaps not durable (madeNotDurable), the record is what the state holds:
  // this process goes by it, and the failure is still reported.
  async repaired (index, figures) {
    let failure
    await this.#write((state) => state.batch([
      { type: 'del', key: repairKey(index) },
      { type: 'put', key: usageKey(index), value: JSON.stringify({ ...figures, open: false }) }
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

'use strict'

const errors = require('./errors')

// Keeps at most `maxOpen` shards open. Shards open on first use and close after
// `idleTimeout` ms without users, or sooner when another shard needs the slot. When
// every open shard is in use, acquire() waits for one to be released.
class ShardPool {
  constructor ({ maxOpen, idleTimeout, waitTimeout, open, close }) {
    this.maxOpen = maxOpen
    this.idleTimeout = idleTimeout
    this.waitTimeout = waitTimeout
    this.openShard = open
    this.closeShard = close
    this.entries = new Map() // index -> { ready, shard, refs, timer, closing }
    this.waiters = []
    this.held = new Map() // index -> why: shards held for exclusive work (repair)
  }

  // The open shard, if any, without acquiring it.
  peek (index) {
    const entry = this.entries.get(index)
    return entry && entry.shard && !entry.closing ? entry.shard : undefined
  }

  // Waits at most waitTimeout ms for a free slot, then fails with EBUSY: streams that
  // hold every slot while waiting for one another would otherwise wait forever.
  // `context` is handed to the open function when this call opens the shard.
  async acquire (index, context) {
    let deadline
    for (;;) {
      if (this.closing) throw errors.closed()
      // Checked on every pass: an operation that was waiting for a slot or for a close
      // must not open a shard that was taken for exclusive work meanwhile.
      if (this.held.has(index)) throw errors.shardBusy(index, this.held.get(index))
      const entry = this.entries.get(index)
      if (entry && entry.closing) {
        await entry.closing
        continue
      }
      if (entry) {
        entry.refs++
        clearTimeout(entry.timer)
        try {
          return await entry.ready
        } catch (err) {
          entry.refs--
          throw err
        }
      }
      if (this.entries.size >= this.maxOpen) {
        // Another caller may take the freed slot first: check everything again.
        if (!(await this.#evictIdle())) {
          deadline = deadline || Date.now() + this.waitTimeout
          await this.#waitForSlot(index, deadline)
        }
        continue
      }
      const created = { refs: 1, shard: undefined, timer: undefined, closing: undefined }
      created.ready = this.openShard(index, context).then(
        (shard) => (created.shard = shard),
        (err) => {
          this.entries.delete(index)
          this.#wake()
          throw err
        }
      )
      this.entries.set(index, created)
      return created.ready
    }
  }

  release (shard) {
    const entry = this.entries.get(shard.index)
    if (!entry || entry.shard !== shard) return
    if (--entry.refs > 0) return
    // LevelDB refuses every write after one failed (a full disk) until it is reopened.
    if (shard.db.failed) {
      this.#close(shard.index).catch(() => {})
      return
    }
    this.entries.delete(shard.index) // re-insert: Map order becomes least recently used first
    this.entries.set(shard.index, entry)
    entry.timer = setTimeout(() => this.#close(shard.index).catch(() => {}), this.idleTimeout)
    entry.timer.unref() // an idle store must never keep the process alive
    this.#wake()
  }

  async #evictIdle () {
    let victim
    for (const [index, entry] of this.entries) {
      if (entry.refs === 0 && entry.shard && !entry.closing) {
        victim = index
        break
      }
    }
    if (victim === undefined) return false
    await this.#close(victim).catch(() => {}) // its closing failed, but the slot is free
    return true
  }

  #close (index, force = false) {
    const entry = this.entries.get(index)
    if (!entry) return Promise.resolve()
    if (entry.closing || (entry.refs > 0 && !force)) return entry.closing || Promise.resolve()
    clearTimeout(entry.timer)
    entry.closing = this.closeShard(entry.shard).finally(() => {
      this.entries.delete(index)
      this.#wake()
    })
    return entry.closing
  }

  // Takes the shard for exclusive work on its files (repair): closes it if it is open
  // and idle, and until unhold() every acquire() of it fails with EBUSY saying `why`.
  async hold (index, why) {
    if (this.held.has(index)) throw errors.shardBusy(index, this.held.get(index))
    this.held.set(index, why)
    try {
      for (let entry = this.entries.get(index); entry; entry = this.entries.get(index)) {
        await Promise.resolve(entry.ready).catch(() => {})
        if (this.entries.get(index) !== entry) continue // its open failed: gone already
        if (entry.refs > 0) throw errors.shardBusy(index, 'is in use: finish or destroy its streams first')
        await this.#close(index).catch(() => {})
      }
    } catch (err) {
      this.held.delete(index)
      throw err
    }
  }

  unhold (index) {
    this.held.delete(index)
    this.#wake()
  }

  #waitForSlot (index, deadline) {
    return new Promise((resolve, reject) => {
      // Not unref'd: an operation waiting here is work the process has to finish.
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((w) => w !== waiter)
        reject(errors.shardsBusy(index, this.maxOpen, this.waitTimeout))
      }, Math.max(0, deadline - Date.now()))
      const waiter = () => {
        clearTimeout(timer)
        resolve()
      }
      this.waiters.push(waiter)
    })
  }

  #wake () {
    const waiters = this.waiters.splice(0)
    for (const resolve of waiters) resolve()
  }

  // From now on acquires, and those waiting for a slot, fail with ECLOSED.
  shutdown () {
    this.closing = true
    this.#wake()
  }

  // Closes every shard, even one still held.
  async closeAll () {
    this.shutdown()
    await Promise.allSettled([...this.entries.values()].map((entry) => entry.ready))
    const results = await Promise.allSettled([...this.entries.keys()].map((index) => this.#close(index, true)))
    const failed = results.find((r) => r.status === 'rejected')
    if (failed) throw failed.reason
  }
}

module.exports = { ShardPool }

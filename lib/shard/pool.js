'use strict'

const errors = require('../api/errors')
const { controller } = require('../api/abortable')
const { Lifecycle } = require('../api/lifecycle')
const { SlotQueue } = require('./slot-queue')

// Keeps at most `maxOpen` shards open. Shards open on first use, or ahead of it, and close when
// another shard needs the slot, or after `idleTimeout` ms without users if it is set. When
// every slot is in use, callers queue for one (slot-queue.js).
class ShardPool {
  #shut = controller() // aborted by shutdown(): every wait for a slot ends
  #life = new Lifecycle('open')

  constructor ({ maxOpen, idleTimeout, waitTimeout, open, close }) {
    this.maxOpen = maxOpen
    this.idleTimeout = idleTimeout
    this.waitTimeout = waitTimeout
    this.openShard = open
    this.closeShard = close
    this.entries = new Map() // index -> { ready, shard, refs, timer, idleSince, closing }
    this.queue = new SlotQueue(this.#shut.signal, () => this.#pump())
    this.evicting = 0 // idle shards being closed to make room
    this.held = new Map() // index -> why: shards held for exclusive work (repair)
  }

  * openShards () {
    for (const entry of this.entries.values()) if (entry.shard && !entry.closing) yield entry.shard
  }

  // Shards open now: neither opening nor closing.
  get openCount () {
    let count = 0
    for (const entry of this.entries.values()) if (entry.shard && !entry.closing) count++
    return count
  }

  peek (index) {
    const entry = this.entries.get(index)
    return entry && entry.shard && !entry.closing ? entry.shard : undefined
  }

  // Open, opening, closing or held for exclusive work.
  inUse (index) {
    return this.entries.has(index) || this.held.has(index)
  }

  get status () {
    return this.#life.status === 'open' && this.closing ? 'closing' : this.#life.status
  }

  get closing () {
    return this.#shut.signal.aborted
  }

  // Waits at most waitTimeout ms for a free slot, then fails with EBUSY: streams that hold
  // every slot while waiting for one another would otherwise wait forever. `context` is handed
  // to the open function when this call opens the shard.
  async acquire (index, context, signal) {
    let deadline
    let turn = false // holds a slot promised by #pump
    let front = false // had its turn once: waits again at the front
    const giveBack = () => {
      if (!turn) return
      turn = false
      this.queue.taken()
      this.#pump()
    }
    for (;;) {
      // On every pass: a shard taken for exclusive work meanwhile is not opened.
      const refused = this.closing ? errors.closed() : this.held.has(index) ? errors.shardBusy(index, this.held.get(index)) : signal && signal.aborted && signal.reason
      if (refused) {
        giveBack()
        throw refused
      }
      const entry = this.entries.get(index)
      if (entry && entry.closing) {
        await entry.closing.catch(() => {}) // a close that failed still frees the slot
        continue
      }
      if (entry) {
        giveBack() // opened meanwhile: the slot goes to the next in line
        return this.#use(entry)
      }
      if (turn || (this.queue.length === 0 && this.#hasRoom())) {
        if (turn) this.queue.taken()
        turn = false
        try {
          return await this.#use(this.#create(index, context))
        } catch (err) {
          // Out of descriptors with other shards open: fewer stay open, and this call waits.
          if (err.code !== 'EMFILE' || this.entries.size === 0) throw err
          this.maxOpen = Math.max(1, Math.min(this.maxOpen, this.entries.size))
          front = true
          continue
        }
      }
      deadline = deadline || Date.now() + this.waitTimeout
      turn = await this.queue.wait(index, deadline, front, signal, () => errors.shardsBusy(index, this.maxOpen, this.waitTimeout))
      front = true
    }
  }

  // Opens the shard ahead of need, idle, if it is neither open nor held and a slot is free with
  // nobody waiting for one; resolves to whether it did. A failure leaves no entry behind.
  async openAhead (index, context) {
    if (this.full || this.held.has(index) || this.entries.has(index)) return false
    const entry = this.#create(index, context)
    await entry.ready
    if (entry.refs === 0 && !entry.closing) this.#idle(index, entry)
    return true
  }

  // No shard may open ahead of need.
  get full () {
    return this.closing || this.queue.length > 0 || !this.#hasRoom()
  }

  #hasRoom () {
    return this.entries.size + this.queue.promised < this.maxOpen
  }

  // The shard `index`, counted as a use, if it is open and free now. `whileClosing`: also once
  // the pool shuts down (work admitted before the store's close() finishes on open shards).
  useOpen (index, { whileClosing = false } = {}) {
    const entry = this.entries.get(index)
    if (!entry || !entry.shard || entry.closing || (this.closing && !whileClosing) || this.held.has(index)) return undefined
    entry.refs++
    return entry.shard
  }

  async #use (entry) {
    entry.refs++
    try {
      return await entry.ready
    } catch (err) {
      entry.refs--
      throw err
    }
  }

  #create (index, context) {
    const created = { refs: 0, shard: undefined, timer: undefined, idleSince: 0, closing: undefined }
    created.ready = this.openShard(index, context).then(
      (shard) => {
        created.shard = shard
        this.#pump() // callers queued for this shard may go on
        return shard
      },
      (err) => {
        this.entries.delete(index)
        this.#pump()
        throw err
      }
    )
    this.entries.set(index, created)
    return created
  }

  release (shard) {
    const entry = this.entries.get(shard.index)
    if (!entry || entry.shard !== shard) return
    if (--entry.refs > 0) return
    // LevelDB refuses every write after one failed (a full disk), until it is reopened.
    if (shard.db.failed) {
      this.#close(shard.index).catch(() => {})
      return
    }
    this.#idle(shard.index, entry)
  }

  #idle (index, entry) {
    // Monotonic, as timers are; #pump evicts the least recently used first.
    entry.idleSince = performance.now()
    if (!entry.timer && this.idleTimeout !== undefined) this.#closeWhenIdle(index, entry, this.idleTimeout)
    this.#pump()
  }

  // Closes the shard once it went `idleTimeout` ms without users. One timer per entry, armed
  // again when it finds the shard used since: no timer per use.
  #closeWhenIdle (index, entry, ms) {
    entry.timer = setTimeout(() => {
      entry.timer = undefined
      if (entry.refs > 0) return // in use: its last release arms a timer again
      const left = entry.idleSince + this.idleTimeout - performance.now()
      if (left > 0) this.#closeWhenIdle(index, entry, left)
      else this.#close(index).catch(() => {})
    }, ms)
    entry.timer.unref() // an idle store must never keep the process alive
  }

  // Hands free slots to queued callers; when none is free, closes least recently used idle
  // shards, one per caller still waiting.
  #pump () {
    if (this.queue.length === 0) return // nobody waits for a slot
    this.queue.handOut((index) => this.entries.has(index), () => this.#hasRoom())
    if (this.evicting >= this.queue.length) return
    const idle = [...this.entries].filter(([, e]) => e.refs === 0 && e.shard && !e.closing).sort(([, a], [, b]) => a.idleSince - b.idleSince)
    for (const [index] of idle) {
      if (this.evicting >= this.queue.length) return
      this.evicting++
      this.#close(index).catch(() => {}).finally(() => { // its closing failed, but the slot is free
        this.evicting--
        this.#pump()
      })
    }
  }

  #close (index, force = false) {
    const entry = this.entries.get(index)
    if (!entry) return Promise.resolve()
    if (entry.closing || (entry.refs > 0 && !force)) return entry.closing || Promise.resolve()
    clearTimeout(entry.timer)
    entry.closing = this.closeShard(entry.shard).finally(() => {
      this.entries.delete(index)
      this.#pump()
    })
    return entry.closing
  }

  // Takes the shard for exclusive work on its files (repair): closes it if it is idle, and until
  // unhold() every acquire() of it fails with EBUSY saying `why`.
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
  }

  // From now on acquires fail with ECLOSED, those waiting for a slot too.
  shutdown () {
    this.#shut.abort(errors.closed())
  }

  // Closes every shard, even one still held; every caller's promise settles once all are.
  closeAll () {
    this.shutdown()
    return this.#life.close(async () => {
      await Promise.allSettled([...this.entries.values()].map((entry) => entry.ready))
      const results = await Promise.allSettled([...this.entries.keys()].map((index) => this.#close(index, true)))
      const failed = results.find((r) => r.status === 'rejected')
      if (failed) throw failed.reason
    })
  }
}

module.exports = { ShardPool }

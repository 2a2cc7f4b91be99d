'use strict'

const errors = require('../api/errors')
const { abortable, controller } = require('../api/abortable')
const { Lifecycle } = require('../api/lifecycle')

// Keeps at most `maxOpen` shards open. Shards open on first use, or ahead of it
// (openAhead), and close when another shard needs the slot, or after `idleTimeout` ms
// without users if it is set. When every slot is in use, callers queue and get slots
// in the order they asked.
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
    this.queue = [] // callers waiting for a slot, first come first served
    this.promised = 0 // slots handed to queued callers that have not taken them yet
    this.evicting = 0 // idle shards being closed to make room
    this.held = new Map() // index -> why: shards held for exclusive work (repair)
  }

  // The shards open and not closing.
  * openShards () {
    for (const entry of this.entries.values()) if (entry.shard && !entry.closing) yield entry.shard
  }

  // The open shard, if any, without acquiring it.
  peek (index) {
    const entry = this.entries.get(index)
    return entry && entry.shard && !entry.closing ? entry.shard : undefined
  }

  // Whether the shard is open, opening, closing or held for exclusive work.
  inUse (index) {
    return this.entries.has(index) || this.held.has(index)
  }

  // 'closing' from shutdown() on.
  get status () {
    return this.#life.status === 'open' && this.closing ? 'closing' : this.#life.status
  }

  // Refusing acquires: shutdown() or closeAll() was called.
  get closing () {
    return this.#shut.signal.aborted
  }

  // Waits at most waitTimeout ms for a free slot, then fails with EBUSY: streams that
  // hold every slot while waiting for one another would otherwise wait forever. A wait
  // ends at once with signal.reason when `signal` aborts (its stream was destroyed).
  // `context` is handed to the open function when this call opens the shard.
  async acquire (index, context, signal) {
    let deadline
    let turn = false // holds a slot promised by #pump
    let front = false // had its turn once: waits again at the front
    const giveBack = () => {
      if (!turn) return
      turn = false
      this.promised--
      this.#pump()
    }
    for (;;) {
      // Checked on every pass: an operation that was waiting for a slot or for a close
      // must not open a shard that was taken for exclusive work meanwhile.
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
        if (turn) this.promised--
        turn = false
        try {
          return await this.#use(this.#create(index, context))
        } catch (err) {
          // Out of descriptors with other shards open: fewer shards stay open from now
          // on, and this call waits for one of them to close instead of failing.
          if (err.code !== 'EMFILE' || this.entries.size === 0) throw err
          this.maxOpen = Math.max(1, Math.min(this.maxOpen, this.entries.size))
          front = true
          continue
        }
      }
      deadline = deadline || Date.now() + this.waitTimeout
      turn = await this.#wait(index, deadline, front, signal)
      front = true
    }
  }

  // Opens the shard ahead of need, idle, when it is neither open nor held and a slot is
  // free with nobody waiting for one: a shard opened ahead never takes a slot from a
  // caller, nor closes another. Resolves to whether it opened one. Its failure rejects,
  // and leaves no entry: the next acquire() opens the shard again, and meets the
  // failure itself if it lasts.
  async openAhead (index, context) {
    if (this.full || this.held.has(index) || this.entries.has(index)) return false
    const entry = this.#create(index, context)
    await entry.ready
    if (entry.refs === 0 && !entry.closing) this.#idle(index, entry)
    return true
  }

  // No shard opens ahead of need: the pool is closing, or has no slot for one.
  get full () {
    return this.closing || this.queue.length > 0 || !this.#hasRoom()
  }

  #hasRoom () {
    return this.entries.size + this.promised < this.maxOpen
  }

  // The shard `index` if it is open and free to use now, counted as a use: what
  // acquire() would resolve to at once, without its promises. Else undefined.
  // whileClosing: also once the pool shuts down (work admitted before the store's
  // close() finishes on the shards still open, which close only after it).
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
    // LevelDB refuses every write after one failed (a full disk) until it is reopened.
    if (shard.db.failed) {
      this.#close(shard.index).catch(() => {})
      return
    }
    this.#idle(shard.index, entry)
  }

  // The shard has no users from now on.
  #idle (index, entry) {
    // Monotonic, as timers are: a clock step cannot keep it open. Also what #pump
    // evicts by, least recently used first.
    entry.idleSince = performance.now()
    if (!entry.timer && this.idleTimeout !== undefined) this.#closeWhenIdle(index, entry, this.idleTimeout)
    this.#pump()
  }

  // Closes the shard once it went `idleTimeout` ms without users. One timer per entry,
  // armed at a release when none is, and armed again when it finds the shard used since:
  // a shard used by every operation costs no timer per use.
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

  // Hands free slots to queued callers in order; when none is free, closes least
  // recently used idle shards, one per caller still waiting.
  #pump () {
    if (this.queue.length === 0) return // nobody waits for a slot
    // Callers whose shard was opened meanwhile need no slot.
    for (const waiter of this.queue.filter((w) => this.entries.has(w.index))) {
      this.queue.splice(this.queue.indexOf(waiter), 1)
      waiter.resolve(false)
    }
    while (this.queue.length > 0 && this.#hasRoom()) {
      this.promised++
      this.queue.shift().resolve(true)
    }
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
  }

  // Resolves to true when a slot is promised to this caller, to false when its shard was
  // opened by another. One that already had its turn keeps its place at the front. Ends
  // with EBUSY at the deadline, with ECLOSED at shutdown(), with signal.reason if
  // `signal` aborts; a caller that leaves the queue holds no slot.
  #wait (index, deadline, front, signal) {
    return abortable([this.#shut.signal, signal], (resolve, reject) => {
      const waiter = { index, resolve }
      const withdraw = () => {
        clearTimeout(timer)
        const at = this.queue.indexOf(waiter)
        if (at !== -1) this.queue.splice(at, 1)
        this.#pump() // one waiting less may leave a shard to evict for nobody
      }
      // Not unref'd: an operation waiting here is work the process has to finish.
      const timer = setTimeout(() => {
        withdraw()
        reject(errors.shardsBusy(index, this.maxOpen, this.waitTimeout))
      }, Math.max(0, deadline - Date.now()))
      waiter.resolve = (promised) => {
        clearTimeout(timer)
        resolve(promised)
      }
      if (front) this.queue.unshift(waiter)
      else this.queue.push(waiter)
      this.#pump()
      return withdraw
    })
  }

  // From now on acquires fail with ECLOSED, and so do those waiting for a slot.
  shutdown () {
    this.#shut.abort(errors.closed())
  }

  // Closes every shard, even one still held. Every caller's promise settles once all
  // are closed.
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

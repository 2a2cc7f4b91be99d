'use strict'

const { abortable, controller } = require('../api/abortable')
const { memoryParts, MEMORY } = require('../api/memory')

// While someone waits, and nothing was given back for this long, the first waiter is
// granted its bytes past the budget.
const STALL_MS = 1000

// Bytes of file data all writers of a store may hold from the caller until LevelDB
// wrote them (a share of the memory budget, api/memory.js); one writer (3 MiB at most)
// never waits. A writer cannot send the chunk it is filling before it is full: writers
// whose callers went quiet could hold the whole budget, and a caller waiting on another
// write would wait for ever. So after STALL_MS with nothing given back, the first waiter
// is granted past the budget, by no more than what stalled writers hold.
class WriteBudget {
  #free
  #waiting = [] // { bytes, resolve }, first come first served
  #holders = new Set() // callbacks of writers holding bytes they have not sent yet
  #shut = controller() // aborted once the store closes: every wait fails
  #stall // the timer of STALL_MS, running while someone waits

  constructor (bytes = memoryParts(MEMORY).writes) {
    this.total = bytes
    this.#free = bytes
  }

  // More than `total` when one writer took more, alone.
  get held () {
    return this.total - this.#free
  }

  ticket () {
    return new Ticket(this)
  }

  tryTake (bytes) {
    if (this.#waiting.length > 0 || !this.#fits(bytes)) return false
    this.#free -= bytes
    return true
  }

  // A wait makes every holder send what it holds to LevelDB, which gives it back. It ends
  // when `signal` aborts (a write destroyed) or the store closes.
  take (bytes, signal) {
    if (this.tryTake(bytes)) return Promise.resolve()
    let waits = false
    const waited = abortable([this.#shut.signal, signal], (resolve) => {
      const waiter = { bytes, resolve }
      this.#waiting.push(waiter)
      waits = true
      if (!this.#stall) this.#watch()
      return () => this.#drop(waiter)
    })
    if (!waits) return waited
    const holders = [...this.#holders]
    this.#holders.clear()
    for (const send of holders) send()
    return waited
  }

  // send(): called once, when someone waits, to send what the holder holds.
  hold (send) {
    this.#holders.add(send)
  }

  unhold (send) {
    this.#holders.delete(send)
  }

  give (bytes) {
    this.#free += bytes
    this.#grant()
    this.#watch()
  }

  // Waits fail with `err` from now on (the store is closing), so writers drain.
  shutdown (err) {
    this.#shut.abort(err)
  }

  #grant () {
    while (this.#waiting.length > 0 && this.#fits(this.#waiting[0].bytes)) {
      const waiter = this.#waiting.shift()
      this.#free -= waiter.bytes
      waiter.resolve()
    }
  }

  // A waiter that leaves may have blocked smaller ones behind it.
  #drop (waiter) {
    const at = this.#waiting.indexOf(waiter)
    if (at === -1) return
    this.#waiting.splice(at, 1)
    this.#grant()
    this.#watch()
  }

  // (Re)starts the STALL_MS timer while someone waits; stops it otherwise.
  #watch () {
    clearTimeout(this.#stall)
    this.#stall = undefined
    if (this.#waiting.length === 0) return
    this.#stall = setTimeout(() => {
      const waiter = this.#waiting.shift()
      this.#free -= waiter.bytes
      waiter.resolve()
      this.#grant()
      this.#watch()
    }, STALL_MS).unref()
  }

  // More than the whole budget is granted when nothing else is taken.
  #fits (bytes) {
    return bytes <= this.#free || this.#free === this.total
  }
}

// One writer's account: given back as LevelDB writes each batch (give), and the rest
// when the write ends, however it ends (close, in a finally).
class Ticket {
  #budget
  #held = 0
  #send // the holder callback registered with the budget, if any
  #closed = false

  constructor (budget) {
    this.#budget = budget
  }

  tryTake (bytes) {
    if (this.#closed || !this.#budget.tryTake(bytes)) return false
    this.#held += bytes
    return true
  }

  async take (bytes, signal) {
    await this.#budget.take(bytes, signal)
    if (this.#closed) this.#budget.give(bytes) // granted to a write that ended meanwhile
    else this.#held += bytes
  }

  give (bytes) {
    const given = Math.min(bytes, this.#held)
    this.#held -= given
    this.#budget.give(given)
  }

  // send(): called once, should someone wait for the budget: sends what this writer holds.
  hold (send) {
    this.#send = send
    this.#budget.hold(send)
  }

  unhold () {
    if (this.#send) this.#budget.unhold(this.#send)
    this.#send = undefined
  }

  close () {
    this.#closed = true
    this.unhold()
    this.give(this.#held)
  }
}

module.exports = { WriteBudget, STALL_MS }

'use strict'

const { abortable } = require('../api/abortable')

// The callers waiting for a slot of the shard pool, first come first served.
class SlotQueue {
  #waiters = []
  #shut // the pool's signal: shutdown() ends every wait
  #changed // called when a wait begins or leaves the line: the pool hands slots out again

  constructor (shut, changed) {
    this.#shut = shut
    this.#changed = changed
    this.promised = 0 // slots promised to callers that have not taken them yet
  }

  get length () {
    return this.#waiters.length
  }

  // Resolves to true when a slot is promised to this caller, to false when another opened its
  // shard. `front`: it had its turn once. Ends with busy() at the deadline, at the pool's
  // shutdown, or when `signal` aborts; a caller that leaves the line holds no slot.
  wait (index, deadline, front, signal, busy) {
    return abortable([this.#shut, signal], (resolve, reject) => {
      const waiter = { index, resolve }
      const withdraw = () => {
        clearTimeout(timer)
        const at = this.#waiters.indexOf(waiter)
        if (at !== -1) this.#waiters.splice(at, 1)
        this.#changed() // one waiting less may leave a shard to evict for nobody
      }
      // Not unref'd: an operation waiting here is work the process has to finish.
      const timer = setTimeout(() => {
        withdraw()
        reject(busy())
      }, Math.max(0, deadline - Date.now()))
      waiter.resolve = (promised) => {
        clearTimeout(timer)
        resolve(promised)
      }
      if (front) this.#waiters.unshift(waiter)
      else this.#waiters.push(waiter)
      this.#changed()
      return withdraw
    })
  }

  // A promised slot was taken, or given back.
  taken () {
    this.promised--
  }

  // Sends off the callers whose shard isOpen(index), then promises slots while hasRoom().
  handOut (isOpen, hasRoom) {
    for (const waiter of this.#waiters.filter((w) => isOpen(w.index))) {
      this.#waiters.splice(this.#waiters.indexOf(waiter), 1)
      waiter.resolve(false)
    }
    while (this.#waiters.length > 0 && hasRoom()) {
      this.promised++
      this.#waiters.shift().resolve(true)
    }
  }
}

module.exports = { SlotQueue }

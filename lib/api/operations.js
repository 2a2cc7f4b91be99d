'use strict'

const errors = require('./errors')

// The calls in flight on a store, which close() waits for: every public method that
// returns a promise, and every shard lease (streams, background work). Once closed, new
// ones fail with ECLOSED.
class Operations {
  #active = 0
  #drained = []
  closed = false

  // Starts one; returns its end, which may be called more than once. `admitted`: part of
  // work admitted before close() (a shard lease), counted even while closing.
  enter ({ admitted = false } = {}) {
    if (this.closed && !admitted) throw errors.closed()
    this.#active++
    let left = false
    return () => {
      if (left) return
      left = true
      if (--this.#active === 0) this.#drained.splice(0).forEach((resolve) => resolve())
    }
  }

  async run (fn) {
    const leave = this.enter()
    try {
      return await fn()
    } finally {
      leave()
    }
  }

  close () {
    this.closed = true
  }

  // Resolves once none is in flight.
  drained () {
    return this.#active === 0 ? Promise.resolve() : new Promise((resolve) => this.#drained.push(resolve))
  }
}

module.exports = { Operations }

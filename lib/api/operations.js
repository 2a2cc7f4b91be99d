'use strict'

const errors = require('./errors')

// The calls in flight on a store, so that close() can wait for them: every public
// method that returns a promise runs as one, and so does every shard lease
// (lib/shard/shards.js), which covers streams and background work. Once closed, new
// ones fail with ECLOSED.
class Operations {
  #active = 0
  #drained = []
  closed = false

  // Starts one; returns its end, a function that may be called more than once.
  // admitted: part of work admitted before close() (a shard lease: the shard pool
  // refuses new ones once the store shuts it down), so counted even while closing.
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

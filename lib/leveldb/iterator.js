'use strict'

const errors = require('../api/errors')
const { classify } = require('./classify')

// An iterator of the binding, fetching up to `prefetch` entries ahead of its consumer.
class Iterator {
  #binding
  #shard
  #prefetch
  #onEnd
  #queue = []
  #fetching = false
  #exhausted = false
  #failure
  #waiting = [] // resolved whenever a fetch completes
  #ended

  constructor (binding, shard, prefetch, onEnd) {
    this.#binding = binding
    this.#shard = shard
    this.#prefetch = prefetch
    this.#onEnd = onEnd
  }

  async next () {
    if (this.#ended) throw errors.closed()
    this.#fetch()
    while (this.#queue.length === 0 && !this.#exhausted) await new Promise((resolve) => this.#waiting.push(resolve))
    if (this.#queue.length === 0 && this.#failure) throw this.#failure
    const entry = this.#queue.shift()
    this.#fetch()
    return entry
  }

  #fetch () {
    if (this.#fetching || this.#exhausted || this.#ended || this.#queue.length > this.#prefetch) return
    this.#fetching = true
    this.#binding.next((err, key, value) => {
      this.#fetching = false
      if (err) [this.#failure, this.#exhausted] = [classify(err, this.#shard), true]
      else if (key === undefined && value === undefined) this.#exhausted = true
      else this.#queue.push({ key, value })
      this.#waiting.splice(0).forEach((resolve) => resolve())
      if (this.#queue.length > 0 || this.#exhausted) this.#fetch()
    })
  }

  // After the fetch in flight: the binding refuses end() during a next().
  end () {
    if (!this.#ended) {
      this.#ended = (async () => {
        while (this.#fetching) await new Promise((resolve) => this.#waiting.push(resolve))
        this.#queue = []
        this.#onEnd()
        await new Promise((resolve) => this.#binding.end(() => resolve()))
      })()
    }
    return this.#ended
  }
}

module.exports = { Iterator }

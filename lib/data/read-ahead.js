'use strict'

// Bytes that all readers of a store may fetch ahead of their consumers. A reader gets
// a quarter of what is left when it opens, between MIN_EACH and MAX_EACH, and gives it
// back when it closes: one reader reads ahead as far as it benefits from, and hundreds
// of slow readers together hold about READ_AHEAD_BUDGET plus MIN_EACH each.
const READ_AHEAD_BUDGET = 128 * 1024 * 1024
const MAX_EACH = 3 * 1024 * 1024
const MIN_EACH = 384 * 1024

class ReadAhead {
  #left

  constructor (bytes = READ_AHEAD_BUDGET) {
    this.#left = bytes
  }

  // The next reader's share: { bytes, give }, where give() hands it back (once).
  take () {
    const bytes = Math.min(MAX_EACH, Math.max(MIN_EACH, Math.floor(this.#left / 4)))
    this.#left -= bytes
    let given = false
    return {
      bytes,
      give: () => {
        if (!given) this.#left += bytes
        given = true
      }
    }
  }
}

// How a reader with `bytes` to read ahead uses them: a third fetched per trip into the
// binding, the rest as chunks queued for the consumer.
function readAheadShape (bytes, chunkSize) {
  return { highWaterMark: Math.max(chunkSize, Math.floor(bytes / 3)), prefetch: Math.max(1, Math.floor((bytes * 2) / 3 / chunkSize)) }
}

module.exports = { ReadAhead, readAheadShape, MIN_EACH, MAX_EACH, READ_AHEAD_BUDGET }

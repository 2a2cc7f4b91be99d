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

// What the binding reads per trip, at most (keys and values). It copies a trip's values
// on its thread, then each again into a Buffer on the main thread; with trips of four
// 128 KiB chunks or more, the main thread's heap grew and shrank with the trips and
// every page of it was faulted in anew, which cost more than the reads themselves. With
// three a trip, it stays put (doc/performance.md, "The read path").
const TRIP_BYTES = 384 * 1024

// How a reader with `bytes` to read ahead uses them: chunks fetched per trip into the
// binding, the rest queued for the consumer, so that the binding fetches the next trip
// on its thread while the queued chunks are checked and handed out.
function readAheadShape (bytes, chunkSize) {
  const chunks = Math.max(1, Math.floor(bytes / chunkSize))
  const perTrip = Math.max(1, Math.min(Math.floor(TRIP_BYTES / chunkSize), Math.floor(chunks / 2)))
  // The binding ends a trip once it has read more than highWaterMark bytes.
  return { highWaterMark: Math.floor((perTrip - 0.5) * chunkSize), prefetch: Math.max(1, chunks - perTrip) }
}

module.exports = { ReadAhead, readAheadShape, MIN_EACH, MAX_EACH, READ_AHEAD_BUDGET }

'use strict'

const { abortable } = require('../api/abortable')
const { memoryParts, MEMORY } = require('../api/memory')

// Bytes all readers of a store may fetch ahead of their consumers (a share of the memory
// budget, api/memory.js). A reader takes a quarter of what is left, between MIN_EACH and
// MAX_EACH, until it closes: hundreds of slow readers hold about the budget plus MIN_EACH each.
const MAX_EACH = 3 * 1024 * 1024
const MIN_EACH = 256 * 1024
// Two gets per libuv thread, which serves each: more only pile up values for the main
// thread to copy, in memory faulted in anew (16 ranges in flight ran slower than one,
// doc/performance.md, "The read path").
const GETS_IN_FLIGHT = 2 * (Number(process.env.UV_THREADPOOL_SIZE) || 4)

class ReadAhead {
  #total
  #left
  #gets = 0 // in flight
  #queued = [] // gets waiting for one in flight to end

  constructor (bytes = memoryParts(MEMORY).readAhead) {
    this.#total = bytes
    this.#left = bytes
  }

  get held () {
    return this.#total - this.#left
  }

  // db.get(key) once fewer than GETS_IN_FLIGHT are in flight; `signal` ends the wait.
  async get (db, key, signal) {
    if (this.#gets < GETS_IN_FLIGHT) this.#gets++
    else {
      await abortable([signal], (resolve) => {
        this.#queued.push(resolve)
        return () => {
          const at = this.#queued.indexOf(resolve)
          if (at !== -1) this.#queued.splice(at, 1)
        }
      })
    }
    try {
      return await db.get(key)
    } finally {
      const next = this.#queued.shift()
      if (next) next() // the place passes on
      else this.#gets--
    }
  }

  // The next reader's share: { bytes, give() (once), get (as above) }.
  take () {
    const bytes = Math.min(MAX_EACH, Math.max(MIN_EACH, Math.floor(this.#left / 4)))
    this.#left -= bytes
    let given = false
    return {
      bytes,
      give: () => {
        if (!given) this.#left += bytes
        given = true
      },
      get: (db, key, signal) => this.get(db, key, signal)
    }
  }
}

// The most the binding reads per trip: with four 128 KiB chunks or more, the main
// thread's heap grew and shrank with each trip, faulted in anew at more cost than the
// reads; with three it stays put (doc/performance.md, "The read path").
const TRIP_BYTES = 384 * 1024

// How a reader spends `bytes` of read-ahead: the binding fetches a trip on its thread
// while the queued chunks are checked and handed out. It keeps its last trip's copy until
// the next trip starts (leveldown's iterator cache), and the iterator fetches while its
// queue holds at most `prefetch`: the reader holds at most prefetch + 2 trips' chunks.
function readAheadShape (bytes, chunkSize) {
  const chunks = Math.max(2, Math.floor(bytes / chunkSize))
  const perTrip = Math.max(1, Math.min(Math.floor(TRIP_BYTES / chunkSize), Math.floor(chunks / 3)))
  // The binding ends a trip once it has read more than highWaterMark bytes.
  return { highWaterMark: Math.floor((perTrip - 0.5) * chunkSize), prefetch: chunks - 2 * perTrip }
}

module.exports = { ReadAhead, readAheadShape, MIN_EACH, MAX_EACH, GETS_IN_FLIGHT }

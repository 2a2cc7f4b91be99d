'use strict'

const { abortable } = require('../api/abortable')
const { memoryParts, MEMORY } = require('../api/memory')

// Bytes that all readers of a store may fetch ahead of their consumers: a share of the
// store's memory budget (api/memory.js). A reader gets a quarter of what is left when
// it opens, between MIN_EACH and MAX_EACH, and gives it back when it closes: one reader
// reads ahead as far as it benefits from, and hundreds of slow readers together hold
// about the budget plus MIN_EACH each.
const MAX_EACH = 3 * 1024 * 1024
const MIN_EACH = 256 * 1024
// Chunk gets a store has in flight at once (a range read fetches one per chunk): two
// per libuv thread, as LevelDB serves each on one of them. More only pile up values
// read, waiting for the main thread to copy them into Buffers; the memory they churn
// through is faulted in anew, and 16 ranges in flight ran slower than one
// (doc/performance.md, "The read path").
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

  // Bytes of the shares readers hold now.
  get held () {
    return this.#total - this.#left
  }

  // db.get(key) once fewer than GETS_IN_FLIGHT of this store's are in flight; the wait
  // ends with signal.reason if `signal` aborts.
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

  // The next reader's share: { bytes, give, get }, where give() hands it back (once),
  // and get(db, key) is the store's get above.
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

// What the binding reads per trip, at most (keys and values). It copies a trip's values
// on its thread, then each again into a Buffer on the main thread; with trips of four
// 128 KiB chunks or more, the main thread's heap grew and shrank with the trips and
// every page of it was faulted in anew, which cost more than the reads themselves. With
// three a trip, it stays put (doc/performance.md, "The read path").
const TRIP_BYTES = 384 * 1024

// How a reader with `bytes` to read ahead uses them: chunks fetched per trip into the
// binding, the rest queued for the consumer, so that the binding fetches the next trip
// on its thread while the queued chunks are checked and handed out. What the reader
// holds is its queue and the binding's copy of its last trip, which the binding keeps
// until the next trip starts (leveldown's iterator cache): the iterator fetches while
// its queue holds at most `prefetch` chunks, so the reader holds at most prefetch + 2
// trips' chunks, and at least two chunks.
function readAheadShape (bytes, chunkSize) {
  const chunks = Math.max(2, Math.floor(bytes / chunkSize))
  const perTrip = Math.max(1, Math.min(Math.floor(TRIP_BYTES / chunkSize), Math.floor(chunks / 3)))
  // The binding ends a trip once it has read more than highWaterMark bytes.
  return { highWaterMark: Math.floor((perTrip - 0.5) * chunkSize), prefetch: chunks - 2 * perTrip }
}

module.exports = { ReadAhead, readAheadShape, MIN_EACH, MAX_EACH, GETS_IN_FLIGHT }

'use strict'

// Bytes of file data that all writers of a store may hold between taking them from
// the caller and LevelDB having written them: bounds memory when hundreds of streams
// write at once, while one writer (3 MiB at most, chunk-writer.js) never waits.
const WRITE_BUDGET = 64 * 1024 * 1024

class WriteBudget {
  #free
  #waiting = [] // { bytes, resolve }, first come first served
  #holders = new Set() // callbacks of writers holding bytes they have not sent yet

  constructor (bytes = WRITE_BUDGET) {
    this.total = bytes
    this.#free = bytes
  }

  // Takes `bytes` now if they are free and nobody waits before this caller.
  tryTake (bytes) {
    if (this.#waiting.length > 0 || !this.#fits(bytes)) return false
    this.#free -= bytes
    return true
  }

  // Whoever waits here makes every holder send what it holds to LevelDB, which then
  // gives it back: a writer whose caller went quiet must not hold memory others need.
  take (bytes) {
    if (this.tryTake(bytes)) return Promise.resolve()
    const waited = new Promise((resolve) => this.#waiting.push({ bytes, resolve }))
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
    while (this.#waiting.length > 0 && this.#fits(this.#waiting[0].bytes)) {
      const { bytes: taken, resolve } = this.#waiting.shift()
      this.#free -= taken
      resolve()
    }
  }

  // More than the whole budget is granted when nothing else is taken.
  #fits (bytes) {
    return bytes <= this.#free || this.#free === this.total
  }
}

module.exports = { WriteBudget, WRITE_BUDGET }

'use strict'

// One close shape for what kfs opens (abstract-level's): `status` is 'opening', 'open',
// 'closing' or 'closed', and close(work) runs `work` once. Every later call gets the
// same promise, so no caller sees a close resolve before the work is done (a LevelDB's
// lock released, its files flushed).
class Lifecycle {
  #closed

  constructor (status = 'opening') {
    this.status = status
  }

  opened () {
    if (this.status === 'opening') this.status = 'open'
  }

  // True from the first close() on.
  get closing () {
    return this.#closed !== undefined
  }

  close (work) {
    if (!this.#closed) {
      this.status = 'closing'
      this.#closed = Promise.resolve().then(work).finally(() => {
        this.status = 'closed'
      })
    }
    return this.#closed
  }
}

module.exports = { Lifecycle }

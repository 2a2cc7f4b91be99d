'use strict'

// One close shape for what kfs opens (abstract-level's): `status` is 'opening', 'open',
// 'closing' or 'closed', and close(work) runs `work` once. Every later call gets the
// same promise: none resolves before the work is done.
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

  // `work` starts before close() returns, so what it shuts (a store refusing new
  // calls) is shut at once; a close() it makes itself gets the same promise.
  close (work) {
    if (!this.#closed) {
      this.status = 'closing'
      let settle
      this.#closed = new Promise((resolve) => { settle = resolve }).finally(() => {
        this.status = 'closed'
      })
      try {
        settle(work())
      } catch (err) {
        settle(Promise.reject(err))
      }
    }
    return this.#closed
  }
}

module.exports = { Lifecycle }

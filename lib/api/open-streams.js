'use strict'

const errors = require('./errors')

// The streams a store has open, which its close() ends: its own at once, those the
// holder serves (args.SERVED) once their requests ended. `closed()`: whether the store's
// operations are closed.
class OpenStreams {
  #all = new Set()
  #served = new Set()
  #closed

  constructor (closed) {
    this.#closed = closed
  }

  // Tracks `stream` until it closes; `served`: the holder serves it.
  add (stream, served) {
    this.#all.add(stream)
    if (served) this.#served.add(stream)
    stream.once('close', () => {
      this.#all.delete(stream)
      this.#served.delete(stream)
    })
    return stream
  }

  // A check for a stream's open: refused once the store closes, unless the holder
  // admitted it before (`served`), as a call already in flight is.
  admission (served) {
    const admitted = served && !this.#closed()
    return () => {
      if (this.#closed() && !admitted) throw errors.closed()
    }
  }

  // Destroys the store's own streams, or every one (`all`): with ECLOSED, unless already
  // finished (close() from a 'finish' or 'end' handler), where the error would only emit.
  destroy ({ all = false } = {}) {
    for (const stream of this.#all) {
      if ((!all && this.#served.has(stream)) || stream.destroyed) continue
      if (stream.writableFinished || stream.readableEnded) stream.destroy()
      else stream.destroy(errors.closed())
    }
  }

  // Resolves once every stream open now has closed.
  closed () {
    return Promise.all([...this.#all].map((s) => new Promise((resolve) => s.once('close', resolve))))
  }
}

module.exports = { OpenStreams }

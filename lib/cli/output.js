'use strict'

// Writes to an output stream (stdout) with backpressure, so listing 100,000 files never
// queues them all in memory, and fails with the stream's error (a full disk, a closed
// pipe) instead of losing it. It keeps one 'error' listener for its whole use, removed
// by close(), whatever the number of writes.
class Output {
  #stream
  #error
  #wake
  #onError = (err) => {
    this.#error = this.#error || err
    if (this.#wake) this.#wake()
  }

  constructor (stream) {
    this.#stream = stream
    stream.on('error', this.#onError)
  }

  async write (text) {
    if (this.#error) throw this.#error
    if (text && !this.#stream.write(text)) {
      await new Promise((resolve) => {
        this.#wake = resolve
        this.#stream.once('drain', resolve)
      })
      this.#stream.off('drain', this.#wake)
      this.#wake = undefined
    }
    if (this.#error) throw this.#error
  }

  // Once what was written is handed to the system; an error met on the way is thrown here.
  async flush () {
    if (!this.#error && !this.#stream.destroyed) await new Promise((resolve) => this.#stream.write('', () => resolve()))
    await new Promise(setImmediate) // a failed write emits 'error' after its callback
    if (this.#error) throw this.#error
  }

  close () {
    this.#stream.off('error', this.#onError)
  }
}

// Writes `text` to `stream` and waits until it is out (or failed).
async function write (stream, text) {
  const out = new Output(stream)
  try {
    await out.write(text)
    await out.flush()
  } finally {
    out.close()
  }
}

function println (stream, line) {
  return write(stream, line + '\n')
}

module.exports = { Output, write, println }

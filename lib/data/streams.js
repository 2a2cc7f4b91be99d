'use strict'

const { Readable, Writable } = require('node:stream')

// Core streams whose hooks hand off to ChunkWriter / ChunkReader. Async setup happens
// in _construct, the commit in _final, cleanup in _destroy.

class WriteStream extends Writable {
  #open
  #writer

  // open: async () => ChunkWriter
  constructor (open, options) {
    super(options)
    this.#open = open
  }

  _construct (callback) {
    this.#open().then((writer) => {
      this.#writer = writer
      callback()
    }, callback)
  }

  _write (chunk, encoding, callback) {
    this.#writer.write(chunk).then(() => callback(), callback)
  }

  _final (callback) {
    this.#writer.finish().then((meta) => {
      this.key = meta.key
      this.size = meta.size
      this.sha256 = meta.sha256
      callback()
    }, callback)
  }

  // Destroyed before the commit: nothing of this write remains.
  _destroy (err, callback) {
    if (!this.#writer) return callback(err)
    this.#writer.abort().then(() => callback(err), () => callback(err))
  }
}

class ReadStream extends Readable {
  #open
  #reader

  // open: async () => ChunkReader
  constructor (open, options) {
    super(options)
    this.#open = open
  }

  _construct (callback) {
    this.#open().then((reader) => {
      this.#reader = reader
      callback()
    }, callback)
  }

  _read () {
    this.#reader.read().then((data) => this.push(data === undefined ? null : data), (err) => this.destroy(err))
  }

  // Only stops reading: the iterator is ended and the shard released, data untouched.
  _destroy (err, callback) {
    if (!this.#reader) return callback(err)
    this.#reader.close().then(() => callback(err), () => callback(err))
  }
}

module.exports = { WriteStream, ReadStream }

'use strict'

const { Readable, Writable } = require('node:stream')
const { controller } = require('../api/abortable')
const { free } = require('../base/freed')

// Core streams whose hooks hand off to ChunkWriter / ChunkReader: setup in _construct,
// the commit in _final, cleanup in _destroy. Node runs _destroy only once _construct is
// done, so destroy() also aborts open(signal)'s signal: a stream destroyed while it waits
// for a shard stops waiting at once, and that is no error of the stream's. Every error
// passes through `named` (errors.named) in _destroy, which each reaches.
function opening (signal, open, callback) {
  open(signal).then((opened) => callback(null, opened), (err) => callback(signal.aborted ? null : err))
}

class WriteStream extends Writable {
  #open
  #writer
  #named
  #frees
  #aborter = controller()

  // open: async (signal) => ChunkWriter. `frees`: the stream owns the chunks written to
  // it (a request's body), freed once a writer that copies them did (base/freed.js).
  constructor (open, named = (err) => err, { frees = false } = {}) {
    super()
    this.#open = open
    this.#named = named
    this.#frees = frees
  }

  _construct (callback) {
    opening(this.#aborter.signal, this.#open, (err, writer) => {
      this.#writer = writer
      callback(err)
    })
  }

  destroy (err, callback) {
    this.#aborter.abort()
    return super.destroy(err, callback)
  }

  _write (chunk, encoding, callback) {
    this.#writer.write(chunk).then(() => {
      if (this.#frees && this.#writer.copies) free(chunk)
      callback()
    }, callback)
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
    err = this.#named(err)
    if (!this.#writer) return callback(err)
    this.#writer.abort().then(() => callback(err), () => callback(err))
  }
}

// Once open, stream[READING] is { size, sha256, start, end } of the version the reader
// reads, no other. Undefined before, and for a holder's (lib/share/client.js). Not API:
// the holder sends it in its headers.
const READING = Symbol('kfs.reading')

class ReadStream extends Readable {
  #open
  #reader
  #named
  #aborter = controller()

  // open: async (signal) => ChunkReader. highWaterMark 0: what is fetched ahead is the
  // reader's, bounded by its read-ahead share, and a paused stream holds no more.
  constructor (open, named = (err) => err) {
    super({ highWaterMark: 0 })
    this.#open = open
    this.#named = named
  }

  // With highWaterMark 0, Node reads after construction only if the stream flows: a
  // consumer waiting for 'readable' (async iteration) would wait forever. So the first
  // chunk is asked for on the tick after Node marks the stream constructed.
  _construct (callback) {
    opening(this.#aborter.signal, this.#open, (err, reader) => {
      this.#reader = reader
      callback(err)
      if (!err) process.nextTick(() => this.read(0))
    })
  }

  get [READING] () {
    const reader = this.#reader
    if (!reader || !reader.meta) return undefined
    return { size: reader.meta.size, sha256: reader.meta.sha256, start: reader.start, end: reader.end }
  }

  destroy (err, callback) {
    this.#aborter.abort()
    return super.destroy(err, callback)
  }

  _read () {
    this.#reader.read().then((data) => this.push(data === undefined ? null : data), (err) => this.destroy(err))
  }

  // Only stops reading: the iterator ends and the shard is released.
  _destroy (err, callback) {
    err = this.#named(err)
    if (!this.#reader) return callback(err)
    this.#reader.close().then(() => callback(err), () => callback(err))
  }
}

module.exports = { WriteStream, ReadStream, READING }

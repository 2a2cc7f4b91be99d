'use strict'

const { Readable, Writable } = require('node:stream')
const { controller } = require('../api/abortable')
const { free } = require('../base/freed')

// Core streams whose hooks hand off to ChunkWriter / ChunkReader. Async setup happens
// in _construct, the commit in _final, cleanup in _destroy.
//
// Node runs _destroy only once _construct is done, so destroy() also aborts the
// signal that open(signal) was given: a stream destroyed while it waits (for a shard
// slot) stops waiting at once, and that wait's end is no error of the stream's.
//
// Every error the stream emits passes through `named` (errors.named: the file's name
// added to an error about its key) in _destroy, which each of them reaches.
function opening (signal, open, callback) {
  open(signal).then((opened) => callback(null, opened), (err) => callback(signal.aborted ? null : err))
}

class WriteStream extends Writable {
  #open
  #writer
  #named
  #frees
  #aborter = controller()

  // open: async (signal) => ChunkWriter. `frees`: the stream owns every chunk written to
  // it (a holder's, of a request's body), and frees each once a writer that copies it
  // (ChunkWriter#copies) has copied it (base/freed.js).
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

// The version a ReadStream reads, once it is open: stream[READING] is { size, sha256,
// start, end } (the file's size and SHA-256, the range's first and last byte), from the
// reader itself, so that no other version can be described. Undefined before, and for a
// reader that does not know it (a holder's, lib/share/client.js). Not part of the API:
// the holder sends it in its headers.
const READING = Symbol('kfs.reading')

class ReadStream extends Readable {
  #open
  #reader
  #named
  #aborter = controller()

  // open: async (signal) => ChunkReader. The stream buffers nothing its consumer did
  // not ask for (highWaterMark 0): what is fetched ahead is the reader's, bounded by its
  // read-ahead share (read-ahead.js), and a paused stream holds no chunk besides.
  constructor (open, named = (err) => err) {
    super({ highWaterMark: 0 })
    this.#open = open
    this.#named = named
  }

  // With highWaterMark 0, Node reads once a stream is constructed only if it flows: a
  // consumer waiting for 'readable' (an async iteration) would wait forever. So the
  // first chunk, which the reader fetched as it opened, is asked for here, on the tick
  // after the one on which Node marks the stream constructed.
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

  // Only stops reading, or waiting to: the iterator is ended and the shard released,
  // data untouched.
  _destroy (err, callback) {
    err = this.#named(err)
    if (!this.#reader) return callback(err)
    this.#reader.close().then(() => callback(err), () => callback(err))
  }
}

module.exports = { WriteStream, ReadStream, READING }

'use strict'

const errors = require('../api/errors')

// The space one write claims in its shard: the file's size when it was announced, else
// what has come so far.
class Reservation {
  constructor (shard, sizeKnown) {
    this.shard = shard
    this.bytes = 0
    this.sizeKnown = sizeKnown
    // What ENOSPC reports: the room there was for this file, not what is left once
    // part of it was claimed.
    this.freeAtStart = shard.free
  }

  add (bytes) {
    const { shard } = this
    if (bytes > shard.cap - shard.used - shard.reserved) throw errors.noSpace(shard.index, this.bytes + bytes, this.freeAtStart, this.sizeKnown)
    shard.reserved += bytes
    this.bytes += bytes
  }

  // Gives the claim up. A commit calls it in the tick it adds the file to `used`, so
  // used + reserved never counts the file twice.
  release () {
    this.shard.reserved -= this.bytes
    this.bytes = 0
  }
}

module.exports = { Reservation }

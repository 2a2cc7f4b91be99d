'use strict'

const errors = require('../api/errors')

// The space one write claims in its shard: the file's size when it was announced, else
// what has come so far.
class Reservation {
  constructor (shard, sizeKnown) {
    this.shard = shard
    this.bytes = 0
    this.sizeKnown = sizeKnown
    this.freeAtStart = shard.free // what ENOSPC reports: the room there was for the whole file
  }

  add (bytes) {
    const { shard } = this
    if (bytes > shard.cap - shard.used - shard.reserved) throw errors.noSpace(shard.index, this.bytes + bytes, this.freeAtStart, this.sizeKnown)
    shard.reserved += bytes
    this.bytes += bytes
  }

  // A commit calls it in the tick it adds the file to `used`: never counted twice.
  release () {
    this.shard.reserved -= this.bytes
    this.bytes = 0
  }
}

module.exports = { Reservation }

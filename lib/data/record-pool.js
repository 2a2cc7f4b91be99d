'use strict'

const { newRecord, recordLength } = require('../shard/chunk-record')

// Whole chunk records kept for reuse across writes, at most this many bytes. The binding
// copies records into its batch before LevelDb#batch returns: a record is free once its
// batch was sent. Fresh memory is what costs here (each page of a new buffer faults in),
// not the copy (doc/performance.md, "The write path").
const KEPT_BYTES = 8 * 1024 * 1024

class RecordPool {
  #free = new Map() // record length -> Buffers
  #bytes = 0
  #mine = new WeakSet() // the memory of whole records this pool made: only those come back

  // A record for `length` bytes of data: a kept one, or new. Only `whole` chunks are kept.
  take (length, whole) {
    const kept = whole && this.#free.get(recordLength(length))
    if (kept && kept.length) {
      this.#bytes -= recordLength(length)
      return kept.pop()
    }
    if (!whole) return newRecord(length, false)
    const record = newRecord(length, true)
    this.#mine.add(record.buffer)
    return record
  }

  // Records (or leading parts) the caller no longer touches. `length`: a whole chunk's
  // record length; others are left to the garbage collector.
  give (records, length) {
    for (const record of records) {
      const buffer = record.buffer
      if (!this.#mine.has(buffer) || record.byteOffset !== 0 || buffer.byteLength !== length || this.#bytes + length > KEPT_BYTES) continue
      let list = this.#free.get(length)
      if (!list) this.#free.set(length, (list = []))
      list.push(record.length === length ? record : Buffer.from(buffer))
      this.#bytes += length
    }
  }
}

module.exports = { RecordPool }

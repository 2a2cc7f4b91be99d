'use strict'

// A ChunkWriter's filled chunk records on their way to LevelDB: batched, sent with at
// most MAX_IN_FLIGHT outstanding, hashed, their records and budget bytes given back.
const errors = require('../api/errors')
const { recordLength, payload } = require('../shard/chunk-record')

// A file is held until BATCH_BYTES of it came: one that fits goes into its commit batch.
// Past that, a synced store sends BATCH_BYTES at a time; another sends each chunk alone,
// so the JS thread chunks and hashes while LevelDB writes, and the binding's batch reuses
// freed pages where a 1 MiB one costs fresh ones (doc/performance.md, "The write path").
const BATCH_BYTES = 1024 * 1024
const MAX_IN_FLIGHT = 4
// With sync, past this many synced batches the rest are written unsynced and the shard's
// memtable is flushed to a synced table before the commit: cheaper than an fsync per
// batch (perf/probes/throughput.js).
const SYNCED_BATCHES = 4

class BatchSender {
  chunks = 0 // chunks handed to LevelDB
  batches = 0
  failure = undefined // the first batch LevelDB refused: the write cannot commit
  #held = [] // filled chunks not sent yet
  #heldBytes = 0
  #inflight = []
  #writer

  // Uses the writer's shard, key, version, sync, ticket, records, chunkSize, hash,
  // mayWrite(), sendHeld and `aborting`.
  constructor (writer) {
    this.#writer = writer
  }

  async add (chunk) {
    const { ticket, sendHeld, sync } = this.#writer
    if (this.#held.length === 0) ticket.hold(sendHeld)
    this.#held.push(chunk)
    this.#heldBytes += chunk.length
    if (this.#heldBytes >= BATCH_BYTES || (this.chunks > 0 && !sync)) await this.flush()
  }

  // The last chunk, at the commit: for inline() or drain().
  addLast (chunk) {
    this.#held.push(chunk)
    this.#heldBytes += chunk.length
  }

  async flush () {
    const chunks = this.#takeHeld()
    if (chunks.length === 0) return
    const { shard, key, sync } = this.#writer
    const batches = sync ? [chunks] : chunks.map((chunk) => [chunk])
    for (const [at, batch] of batches.entries()) {
      // While the store's memtables are past its memory budget, a flush ends first.
      await shard.room()
      if (this.#writer.aborting) {
        this.giveBack(batches.slice(at).flat()) // the rest is not sent
        throw errors.cancelled(key)
      }
      const first = this.chunks
      const written = this.#send(first, batch, batch.reduce((sum, chunk) => sum + chunk.length, 0))
      // The first batch carries the pending record: it must land before any other, or a
      // crash could leave chunks that no pending record points to.
      if (first === 0) await written
      else this.#inflight.push(written)
      this.#hash(batch)
      this.giveBack(batch) // the binding copied them
      while (this.#inflight.length >= MAX_IN_FLIGHT) await this.#inflight.shift()
    }
  }

  // A failure is kept: a batch sent for another writer (sendHeld) has nobody awaiting
  // it, and the write must never commit without its chunks.
  #send (first, chunks, bytes) {
    const { shard, key, version, sync, ticket } = this.#writer
    let written
    try {
      this.#writer.mayWrite()
      this.chunks += chunks.length
      this.batches++
      written = shard.writeChunks(key, version, first, chunks, { sync: sync && this.batches <= SYNCED_BATCHES })
    } catch (err) {
      written = Promise.reject(err)
    }
    const settled = () => ticket.give(bytes)
    written.then(settled, (err) => {
      this.failure = this.failure || err
      settled()
    })
    return written
  }

  // With no batch sent, the chunks held go into the commit batch: one atomic write, no
  // pending record. Their bytes stay taken until the write ends.
  inline () {
    if (this.chunks > 0) return []
    const chunks = this.#takeHeld()
    if (chunks.length) this.#writer.mayWrite()
    this.chunks = chunks.length
    this.#hash(chunks)
    return chunks
  }

  async drain () {
    await this.flush()
    while (this.#inflight.length > 0) await this.#inflight.shift()
    if (this.failure) throw this.failure
    if (this.#writer.sync && this.batches > SYNCED_BATCHES) await this.#writer.shard.db.flush()
  }

  // An aborted write: once its batches settled, its records (and `more`) go back.
  async abandon (more) {
    await Promise.allSettled(this.#inflight)
    this.giveBack([...this.#takeHeld(), ...more])
  }

  // Records sent (the binding copied them), of a commit sent or never sent, or aborted.
  giveBack (chunks) {
    this.#writer.records.give(chunks, recordLength(this.#writer.chunkSize))
  }

  #takeHeld () {
    const chunks = this.#held
    if (chunks.length) this.#writer.ticket.unhold()
    this.#held = []
    this.#heldBytes = 0
    return chunks
  }

  #hash (chunks) {
    const { hash } = this.#writer
    if (hash) for (const chunk of chunks) hash.update(payload(chunk))
  }
}

module.exports = { BatchSender, BATCH_BYTES, MAX_IN_FLIGHT }

'use strict'

const { shardFor } = require('../shard/routing')
const { ChunkWriter } = require('./chunk-writer')
const { ChunkReader } = require('./chunk-reader')
const { RecordPool } = require('./record-pool')
const { newVersion, newMeta } = require('../shard/records')
const { copyIn } = require('../shard/chunk-record')
const errors = require('../api/errors')

// The data path of an open store: routes a key to its shard, and opens writers and
// readers of files there on shard leases, with the store's write budget and read-ahead.
// Each is part of a call or stream the store admitted: its lease is `admitted`.
class Files {
  constructor ({ shards, referenceId, shardCount, chunkSize, writeBudget, readAhead }) {
    Object.assign(this, { shards, referenceId, shardCount, chunkSize, writeBudget, readAhead })
    this.records = new RecordPool() // the store's, gone with it
  }

  route (key) {
    return shardFor(this.referenceId, key, this.shardCount)
  }

  // fn(shard) with the key's shard leased, or absent() when that shard was never
  // created (so it cannot hold the key). useReserve: see Shards#lease.
  inShardOf (key, fn, absent, { useReserve = true } = {}) {
    const index = this.route(key)
    return this.shards.has(index) ? this.shards.inShard(index, fn, { useReserve, admitted: true }) : absent()
  }

  // A ChunkWriter of `target` ({ key, name }) on a write lease; size, sha256 and
  // expectedSha256 and sync as ChunkWriter takes them. `signal` ends a wait for the shard.
  async openWriter (target, { size, sha256, expectedSha256, sync, signal } = {}) {
    const lease = await this.shards.lease(this.route(target.key), { write: true, admitted: true, signal })
    try {
      return new ChunkWriter({ lease, ...target, chunkSize: this.chunkSize, size, sha256, expectedSha256, sync, budget: this.writeBudget, records: this.records })
    } catch (err) {
      lease.release()
      throw err
    }
  }

  // Writes `chunks` (an iterable of Buffers) as the file `target` and commits it.
  async write (target, chunks, options) {
    const data = Array.isArray(chunks) && chunks.length === 1 && chunks[0]
    if (data && data.length < this.chunkSize && options.size === data.length && options.sha256) return this.#writeSmall(target, data, options)
    const writer = await this.openWriter(target, options)
    try {
      for await (const chunk of chunks) await writer.write(chunk)
      return await writer.finish()
    } catch (err) {
      await writer.abort()
      throw err
    }
  }

  // A file at hand that is less than a chunk, its SHA-256 known: what a ChunkWriter does
  // for it (its one record takes no write budget, as a chunk not whole, and goes into
  // the commit batch), without the machinery of a file that comes in pieces.
  async #writeSmall ({ key, name }, data, { sha256, sync }) {
    const lease = await this.shards.lease(this.route(key), { write: true, admitted: true })
    const { shard } = lease
    let reservation
    try {
      reservation = shard.reserve(data.length) // ENOSPC before any work
      const inline = []
      if (data.length > 0) {
        const record = this.records.take(data.length, false)
        copyIn(record, 0, data)
        inline.push(record)
        lease.mayWrite()
      }
      const meta = newMeta({ key, name, version: newVersion(), size: data.length, chunks: inline.length, sha256 })
      await shard.commit(meta, reservation, undefined, inline, { sync })
      return meta
    } finally {
      if (reservation) reservation.release()
      lease.release()
    }
  }

  // A ChunkReader of bytes `range` of `key`; sha256, unchecked and meta as ChunkReader
  // takes them. Only opening the shard writes (on a full disk, the lease's useReserve
  // gives the reserve up for that); the reader's own work is reads. `signal` ends its
  // waits (for the shard, for a place among the store's gets in flight). `lease`: a read
  // lease on the key's shard that readSmall handed over, for the reader to hold.
  async openReader (key, range, { sha256, unchecked, meta, lease, signal } = {}) {
    const held = lease || (await this.#readLease(key, signal))
    return ChunkReader.open({ lease: held, readAhead: this.readAhead, key, chunkSize: this.chunkSize, range, meta, sha256, unchecked, signal })
  }

  // ChunkReader.readSmall of `key` on a read lease: { data }, the whole file, when it is
  // at most one chunk (with chunk digests), the lease given back; otherwise { meta, lease },
  // for the caller to hand both to openReader, so that the read goes on in the shard
  // it holds rather than queue for it again.
  async readSmall (key, { unchecked } = {}) {
    const index = this.route(key)
    const lease = this.shards.leaseOpen(index, { admitted: true }) || (await this.#readLease(key, undefined, index))
    let small
    try {
      small = await ChunkReader.readSmall({ lease, readAhead: this.readAhead, key, chunkSize: this.chunkSize, unchecked })
    } catch (err) {
      lease.release()
      throw err
    }
    if (!small.data) return { meta: small.meta, lease }
    lease.release()
    return { data: small.data }
  }

  #readLease (key, signal, index = this.route(key)) {
    if (!this.shards.has(index)) return Promise.reject(errors.notFound(key))
    return this.shards.lease(index, { useReserve: true, admitted: true, signal })
  }
}

module.exports = { Files }

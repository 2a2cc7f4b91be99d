'use strict'

const { shardFor } = require('../shard/routing')
const { ChunkWriter } = require('./chunk-writer')
const { ChunkReader } = require('./chunk-reader')
const { RecordPool } = require('./record-pool')
const { newVersion, newMeta } = require('../shard/records')
const { copyIn } = require('../shard/chunk-record')
const errors = require('../api/errors')

// The data path of an open store: routes a key to its shard, and opens writers and
// readers there on leases (`admitted`: each is part of a call the store admitted).
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

  // A ChunkWriter of `target` ({ key, name }) on a write lease. `signal` ends a wait for
  // the shard.
  async openWriter (target, { size, sha256, expectedSha256, expires, sync, signal } = {}) {
    const lease = await this.shards.lease(this.route(target.key), { write: true, admitted: true, signal })
    try {
      return new ChunkWriter({ lease, ...target, chunkSize: this.chunkSize, size, sha256, expectedSha256, expires, sync, budget: this.writeBudget, records: this.records })
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

  // A file at hand of less than a chunk, its SHA-256 known: what a ChunkWriter would do
  // (one record, no write budget, in the commit batch), without its machinery.
  async #writeSmall ({ key, name }, data, { sha256, expires, sync }) {
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
      const meta = newMeta({ key, name, version: newVersion(), size: data.length, chunks: inline.length, sha256, expires })
      await shard.commit(meta, reservation, undefined, inline, { sync })
      return meta
    } finally {
      if (reservation) reservation.release()
      lease.release()
    }
  }

  // A ChunkReader of bytes `range` of `key`. Only opening the shard writes (useReserve
  // gives the disk reserve up for it). `signal` ends its waits. `lease`: readSmall's.
  async openReader (key, range, { sha256, unchecked, meta, lease, signal } = {}) {
    const held = lease || (await this.#readLease(key, signal))
    return ChunkReader.open({ lease: held, readAhead: this.readAhead, key, chunkSize: this.chunkSize, range, meta, sha256, unchecked, signal })
  }

  // { data } of a file of at most one chunk, the lease given back; else { meta, lease },
  // for openReader, so that the read goes on in the shard held rather than queue again.
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

'use strict'

const { contentHash } = require('../api/keys')
const { newVersion, newMeta } = require('../shard/records')
const { recordLength, copyIn, payload } = require('../shard/chunk-record')
const { RecordPool } = require('./record-pool')
const { WriteBudget } = require('./write-budget')
const errors = require('../api/errors')

// A file is held until BATCH_BYTES of it came: one that fits goes into its commit batch.
// Past that, a store that does not sync sends each chunk as a batch of its own, up to
// MAX_IN_FLIGHT outstanding, so the JS thread chunks and hashes while LevelDB writes.
// The binding builds each batch on the JS thread in memory that grows as records are
// added: a 1 MiB batch costs fresh pages every time, a one-chunk batch reuses freed ones
// (doc/performance.md, "The write path"). A synced store sends BATCH_BYTES at a time.
const BATCH_BYTES = 1024 * 1024
const MAX_IN_FLIGHT = 4
// With sync, the first batches of a write are synced one by one; past this many, the
// rest are written unsynced and the shard's memtable is flushed to a synced table
// before the commit, which costs less than an fsync per batch (perf/probes/throughput.js).
const SYNCED_BATCHES = 4

// Writes one version of one file into a leased shard and commits it. Nothing is
// visible until finish() commits; abort() (or any failure) removes what was written.
// Calls must not overlap: each write() is awaited before the next, as a Writable does.
// The writer owns what it takes: its lease, its space in the shard (a Reservation) and
// its bytes of the write budget (a Ticket). #end, in a finally of finish() and abort(),
// gives back whatever is still held, however the write ends.
class ChunkWriter {
  #stopWait // aborted by abort(): ends a wait for the budget
  copies = true // write(data) keeps nothing of data once it resolves (#write)

  // lease: { shard, release, mayWrite } (Shards#lease); mayWrite() throws if no more
  // data may be written (the disk reserve was given up).
  // sha256: the content's hash, known to the caller (put): not computed again.
  // expectedSha256: checked before the commit; a mismatch fails with EINTEGRITY.
  // budget: the store's WriteBudget, taken for every chunk record from when the writer
  // starts filling it until LevelDB wrote it;
  // records: its RecordPool, the chunk records writes reuse. sync: this write is synced
  // (as every write is in a shard of a synced store).
  constructor ({ lease, key, name, chunkSize, size, sha256, expectedSha256, budget = new WriteBudget(), records = new RecordPool(), sync = false }) {
    const { shard } = lease
    this.lease = lease
    this.mayWrite = lease.mayWrite
    // Others wait for memory: the chunks this writer holds go to LevelDB now, after the
    // write in progress if any, rather than at its caller's next write.
    this.sendHeld = () => this.#serial(() => this.#flush()).catch(() => {})
    this.shard = shard
    this.sync = shard.sync || sync
    this.key = key
    this.name = name
    this.chunkSize = chunkSize
    this.expectedSize = size
    Object.assign(this, { sha256, expectedSha256, records })
    this.hash = sha256 ? undefined : contentHash()
    this.version = newVersion()
    this.size = 0
    this.chunks = 0 // chunks handed to LevelDB
    this.batches = 0
    this.partial = undefined // a chunk being filled, owned by the writer
    this.partialBytes = 0
    this.batch = []
    this.batchBytes = 0
    this.inflight = []
    this.failure = undefined // the first batch LevelDB refused: the write cannot commit
    this.queue = Promise.resolve()
    this.state = 'writing' // -> 'committed' | 'aborted'
    // A known size is claimed before anything is written: ENOSPC costs no I/O.
    this.reservation = shard.reserve(size || 0, size !== undefined)
    this.ticket = budget.ticket()
    shard.writing.add(this.version)
  }

  write (data) {
    return this.#serial(() => this.#write(data))
  }

  // However it ends, the write gives back what it took (#end): a write that cannot
  // commit (aborted, or a batch failed) is aborted here rather than left to the caller.
  finish () {
    return this.#serial(async () => {
      try {
        this.#usable()
        const meta = await this.#commit()
        this.state = 'committed'
        return meta
      } catch (err) {
        await this.#abort()
        throw err
      } finally {
        this.#end()
      }
    }, true)
  }

  // Safe to call at any time and more than once; waits for a write in progress, which
  // stops at once if it waits for the budget.
  abort () {
    this.aborting = true
    if (this.#stopWait) this.#stopWait.abort(errors.cancelled(this.key))
    return this.#serial(async () => {
      try {
        await this.#abort()
      } finally {
        this.#end()
      }
    }, true)
  }

  // Runs fn after the calls before it; unless `always`, only while the write can go on.
  #serial (fn, always = false) {
    const run = this.queue.then(() => {
      if (!always) this.#usable()
      return fn()
    })
    this.queue = run.catch(() => {})
    return run
  }

  // Throws unless the write can go on: not aborted, not committed, no batch failed.
  #usable () {
    if (this.state === 'aborted') throw errors.cancelled(this.key)
    if (this.state !== 'writing') throw errors.invalidValue('data', `cannot be written: the write of ${this.key} is already committed`)
    if (this.failure) throw this.failure
  }

  // Every chunk is copied into a record of its own (its header holds its digest), so
  // nothing of `data` is kept once this call resolves.
  async #write (data) {
    if (this.expectedSize === undefined) this.reservation.add(data.length)
    else if (this.size + data.length > this.expectedSize) throw errors.invalidValue('data', `is longer than the ${this.expectedSize} bytes announced`)
    this.size += data.length
    let offset = 0
    while (offset < data.length && !this.aborting) {
      // A chunk starts here; a file known to end sooner gets a record of what is left.
      // The record counts in the budget from now on, as what it will hold is taken
      // from the caller.
      if (!this.partial) {
        const length = Math.min(this.chunkSize, this.#left(data.length - offset))
        await this.#take(recordLength(length))
        if (this.aborting) break
        this.partial = this.records.take(length, length === this.chunkSize)
      }
      const take = Math.min(this.chunkSize - this.partialBytes, data.length - offset)
      copyIn(this.partial, this.partialBytes, data, offset, offset + take)
      this.partialBytes += take
      offset += take
      if (this.partialBytes === this.chunkSize) await this.#addChunk(this.#takePartial())
    }
  }

  // Bytes still to come from here, if the size was announced; `pending` of them are
  // in the write() in progress.
  #left (pending) {
    return this.expectedSize === undefined ? Infinity : this.expectedSize - this.size + pending
  }

  #takePartial () {
    const chunk = this.partial.subarray(0, recordLength(this.partialBytes))
    this.partial = undefined
    this.partialBytes = 0
    return chunk
  }

  // `bytes` of the budget, for a chunk record about to be filled.
  async #take (bytes) {
    if (this.ticket.tryTake(bytes)) return
    await this.#flush() // what this writer holds must not be waited for while it waits
    this.#stopWait = this.#stopWait || new AbortController()
    if (this.aborting) throw errors.cancelled(this.key)
    await this.ticket.take(bytes, this.#stopWait.signal)
  }

  // A filled chunk, whose record's bytes the budget counts since it was started.
  async #addChunk (chunk) {
    if (this.batch.length === 0) this.ticket.hold(this.sendHeld)
    this.batch.push(chunk)
    this.batchBytes += chunk.length
    if (this.batchBytes >= BATCH_BYTES || (this.chunks > 0 && !this.sync)) await this.#flush()
  }

  async #flush () {
    const chunks = this.batch
    if (chunks.length === 0) return
    this.ticket.unhold()
    this.batch = []
    this.batchBytes = 0
    for (const batch of this.sync ? [chunks] : chunks.map((chunk) => [chunk])) {
      // While the store's memtables are past its memory budget, a flush ends first.
      const room = this.shard.room()
      if (room) {
        await room
        if (this.aborting) throw errors.cancelled(this.key) // the rest is not sent
      }
      const first = this.chunks
      const written = this.#send(first, batch, batch.reduce((sum, chunk) => sum + chunk.length, 0))
      // The first batch carries the pending record: it must land before any other batch,
      // or a crash could leave chunks that no pending record points to.
      if (first === 0) await written
      else this.inflight.push(written)
      this.#hashChunks(batch)
      this.#giveBack(batch) // the batch holds copies (#send)
      while (this.inflight.length >= MAX_IN_FLIGHT) await this.inflight.shift()
    }
  }

  // A batch's bytes go back to the budget however the batch ends: refused before it was
  // sent, written, or failed. A failure is kept: a batch sent for another writer
  // (sendHeld) has nobody awaiting it, and the write must never commit without its
  // chunks.
  #send (first, chunks, bytes) {
    let written
    try {
      this.mayWrite()
      this.chunks += chunks.length
      this.batches++
      written = this.shard.writeChunks(this.key, this.version, first, chunks, { sync: this.sync && this.batches <= SYNCED_BATCHES })
    } catch (err) {
      written = Promise.reject(err)
    }
    const settled = () => this.ticket.give(bytes)
    written.then(settled, (err) => {
      this.failure = this.failure || err
      settled()
    })
    return written
  }

  // Records nobody needs any more: sent in a batch (the binding copied them), or of a
  // commit that was sent or never will be, or of a write aborted.
  #giveBack (chunks) {
    this.records.give(chunks, recordLength(this.chunkSize))
  }

  #hashChunks (chunks) {
    if (this.hash) for (const chunk of chunks) this.hash.update(payload(chunk))
  }

  async #commit () {
    if (this.partialBytes > 0) this.batch.push(this.#takePartial())
    // A file that fits in one batch goes into the commit batch itself: one atomic write,
    // no pending record.
    let inline = []
    if (this.chunks === 0) {
      inline = this.batch // its bytes stay taken until the write ends
      this.ticket.unhold()
      this.batch = []
      this.batchBytes = 0
      if (inline.length) this.mayWrite()
      this.chunks = inline.length
      this.#hashChunks(inline)
    }
    try {
      return await this.#committed(inline)
    } finally {
      this.#giveBack(inline) // the commit batch was sent, or never will be
    }
  }

  async #committed (inline) {
    await this.#flush()
    while (this.inflight.length > 0) await this.inflight.shift()
    if (this.failure) throw this.failure
    if (this.sync && this.batches > SYNCED_BATCHES) await this.shard.db.flush()
    if (this.expectedSize !== undefined && this.size !== this.expectedSize) {
      throw errors.invalidValue('data', `is ${this.size} bytes, ${this.expectedSize} were announced`)
    }
    const sha256 = this.sha256 || this.hash.digest('hex')
    if (this.expectedSha256 && sha256 !== this.expectedSha256) {
      throw errors.integrity(this.key, 'the content written does not have the expected SHA-256; nothing was committed', { expected: this.expectedSha256, found: sha256 })
    }
    const meta = newMeta({ key: this.key, name: this.name, version: this.version, size: this.size, chunks: this.chunks, sha256 })
    await this.shard.commit(meta, this.reservation, () => this.aborting, inline, { sync: this.sync }).catch((err) => {
      // Committed, perhaps not durably (Shard#apply): the version is the file now.
      if (err.written) this.state = 'committed'
      throw err
    })
    return meta
  }

  async #abort () {
    if (this.state !== 'writing') return
    this.state = 'aborted'
    await Promise.allSettled(this.inflight)
    this.#giveBack(this.partial ? [...this.batch, this.partial] : this.batch)
    this.partial = undefined
    this.partialBytes = 0
    this.batch = []
    this.batchBytes = 0
    // Before the cleanup, which other writes must not wait for: a failing write's
    // space in the shard and its memory go back now (#end finds nothing left).
    this.ticket.close()
    this.reservation.release()
    try {
      if (this.batches > 0) await this.shard.discard(this.key, this.version)
    } catch {
      // The pending record stays: compact(), or the next process to open the shard,
      // removes these chunks.
    }
  }

  // Gives back all the writer took, however the write ended: what is left of its budget
  // (batches LevelDB wrote gave theirs back already, an abort the rest), its claim on
  // the shard's space (a commit consumed it, an abort gave it up), and its lease.
  // Idempotent: whatever was given back earlier is not given twice.
  #end () {
    this.ticket.close()
    this.reservation.release()
    this.shard.writing.delete(this.version)
    this.lease.release()
  }
}

module.exports = { ChunkWriter, BATCH_BYTES, MAX_IN_FLIGHT }

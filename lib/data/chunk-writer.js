'use strict'

const { contentHash } = require('../api/keys')
const { newVersion, newMeta } = require('../shard/records')
const { recordLength, copyIn } = require('../shard/chunk-record')
const { RecordPool } = require('./record-pool')
const { WriteBudget } = require('./write-budget')
const { BatchSender, BATCH_BYTES, MAX_IN_FLIGHT } = require('./batch-sender')
const errors = require('../api/errors')

// Writes one version of one file into a leased shard, chunk by chunk, and commits it.
// Nothing is visible until finish() commits; abort() (or any failure) removes what was
// written. Each write() is awaited before the next, as a Writable does. What the writer
// takes (its lease, a Reservation in the shard, a Ticket of the write budget) #end gives
// back, in a finally of finish() and abort().
class ChunkWriter {
  #stopWait // aborted by abort(): ends a wait for the budget
  copies = true // write(data) keeps nothing of data once it resolves (#write)

  // lease: Shards#lease's; its mayWrite() throws once the disk reserve was given up.
  // sha256: the content's hash, known to the caller (put). expectedSha256: checked before
  // the commit (EINTEGRITY). budget: the store's WriteBudget, holding each chunk record
  // from its filling until LevelDB wrote it. records: its RecordPool. sync: this write is
  // synced (as every write in a synced store's shard). expires: the version's expiry time
  // (ms since the epoch), if it has one.
  constructor ({ lease, key, name, chunkSize, size, sha256, expectedSha256, expires, budget = new WriteBudget(), records = new RecordPool(), sync = false }) {
    const { shard } = lease
    this.lease = lease
    this.mayWrite = lease.mayWrite
    // Others wait for memory: what this writer holds goes to LevelDB after the write in
    // progress, not at its caller's next write.
    this.sendHeld = () => this.#serial(() => this.sent.flush()).catch(() => {})
    this.shard = shard
    this.sync = shard.sync || sync
    this.key = key
    this.name = name
    this.chunkSize = chunkSize
    this.expectedSize = size
    Object.assign(this, { sha256, expectedSha256, expires, records })
    this.hash = sha256 ? undefined : contentHash()
    this.version = newVersion()
    this.size = 0
    this.partial = undefined // a chunk being filled, owned by the writer
    this.partialBytes = 0
    this.queue = Promise.resolve()
    this.state = 'writing' // -> 'committed' | 'aborted'
    // A known size is claimed before anything is written: ENOSPC costs no I/O.
    this.reservation = shard.reserve(size || 0, size !== undefined)
    this.ticket = budget.ticket()
    this.sent = new BatchSender(this)
    shard.writing.add(this.version)
  }

  write (data) {
    return this.#serial(() => this.#write(data))
  }

  // A write that cannot commit (aborted, or a batch failed) is aborted here.
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

  // Safe at any time, more than once; waits for a write in progress, which stops at once
  // if it waits for the budget.
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

  #usable () {
    if (this.state === 'aborted') throw errors.cancelled(this.key)
    if (this.state !== 'writing') throw errors.invalidValue('data', `cannot be written: the write of ${this.key} is already committed`)
    if (this.sent.failure) throw this.sent.failure
  }

  // Copied into chunk records: nothing of `data` is kept once this resolves.
  async #write (data) {
    if (this.expectedSize === undefined) this.reservation.add(data.length)
    else if (this.size + data.length > this.expectedSize) throw errors.invalidValue('data', `is longer than the ${this.expectedSize} bytes announced`)
    this.size += data.length
    let offset = 0
    while (offset < data.length && !this.aborting) {
      // A chunk starts: a file known to end sooner gets a record of what is left, counted
      // in the budget from now on.
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
      if (this.partialBytes === this.chunkSize) await this.sent.add(this.#takePartial())
    }
  }

  // Bytes still to come if the size was announced, `pending` of them in this write().
  #left (pending) {
    return this.expectedSize === undefined ? Infinity : this.expectedSize - this.size + pending
  }

  #takePartial () {
    const chunk = this.partial.subarray(0, recordLength(this.partialBytes))
    this.partial = undefined
    this.partialBytes = 0
    return chunk
  }

  async #take (bytes) {
    if (this.ticket.tryTake(bytes)) return
    await this.sent.flush() // what this writer holds must not be waited for while it waits
    this.#stopWait = this.#stopWait || new AbortController()
    if (this.aborting) throw errors.cancelled(this.key)
    await this.ticket.take(bytes, this.#stopWait.signal)
  }

  async #commit () {
    if (this.partialBytes > 0) this.sent.addLast(this.#takePartial())
    const inline = this.sent.inline()
    try {
      return await this.#committed(inline)
    } finally {
      this.sent.giveBack(inline) // the commit batch was sent, or never will be
    }
  }

  async #committed (inline) {
    await this.sent.drain()
    if (this.expectedSize !== undefined && this.size !== this.expectedSize) {
      throw errors.invalidValue('data', `is ${this.size} bytes, ${this.expectedSize} were announced`)
    }
    const sha256 = this.sha256 || this.hash.digest('hex')
    if (this.expectedSha256 && sha256 !== this.expectedSha256) {
      throw errors.integrity(this.key, 'the content written does not have the expected SHA-256; nothing was committed', { expected: this.expectedSha256, found: sha256 })
    }
    const meta = newMeta({ key: this.key, name: this.name, version: this.version, size: this.size, chunks: this.sent.chunks, sha256, expires: this.expires })
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
    await this.sent.abandon(this.partial ? [this.partial] : [])
    this.partial = undefined
    this.partialBytes = 0
    // Space and memory go back before the cleanup, which other writes must not wait for.
    this.ticket.close()
    this.reservation.release()
    try {
      if (this.sent.batches > 0) await this.shard.discard(this.key, this.version)
    } catch {
      // The pending record stays: compact() or the shard's next open removes the chunks.
    }
  }

  // Gives back whatever the writer still holds; what was given back is not given twice.
  #end () {
    this.ticket.close()
    this.reservation.release()
    this.shard.writing.delete(this.version)
    this.lease.release()
  }
}

module.exports = { ChunkWriter, BATCH_BYTES, MAX_IN_FLIGHT }

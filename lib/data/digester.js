'use strict'

const path = require('node:path')
const { Worker } = require('node:worker_threads')
const { sha256Of } = require('../api/keys')

// put(buffer) copies the caller's bytes to the thread in pieces, at most PIECES_AHEAD
// ahead of the hashing: memory stays bounded.
const PIECE = 8 * 1024 * 1024
const PIECES_AHEAD = 2
// Below this, handing the bytes over costs more than hashing them on the caller's thread.
const OFFLOAD_DIGEST_BYTES = 4 * 1024 * 1024

// SHA-256 and chunk checks on a worker thread, for large puts and whole-file reads.
// Started on first use, unref'd while no digest is pending, terminated by close(). If the
// worker dies, its jobs reject (callers hash inline) and the next job starts a new one.
class Digester {
  constructor () {
    this.worker = undefined
    this.pending = new Map() // id -> { resolve, reject, acks: resolvers of update()s awaiting the worker, in order }
    this.nextId = 0
  }

  begin () {
    if (!this.worker) this.#start()
    const id = this.nextId++
    const job = { id, digest: undefined }
    job.digest = new Promise((resolve, reject) => this.pending.set(id, { resolve, reject, acks: [] }))
    job.digest.catch(() => {}) // a job may be cancelled and never awaited
    this.worker.ref()
    return job
  }

  // Hands `data` over: the caller must not use it afterwards. `ack`: resolves once hashed.
  update (job, data, { ack = false } = {}) {
    const pending = this.pending.get(job.id)
    if (!pending) return job.digest // failed or cancelled: its digest rejects
    const whole = data.byteOffset === 0 && data.byteLength === data.buffer.byteLength && !(data.buffer instanceof SharedArrayBuffer)
    const own = whole ? data : new Uint8Array(data) // structured clone would copy a whole slab
    const hashed = ack ? new Promise((resolve) => pending.acks.push(resolve)) : undefined
    this.worker.postMessage({ id: job.id, data: own, ack }, [own.buffer])
    return hashed && Promise.race([hashed, job.digest])
  }

  finish (job) {
    if (this.pending.has(job.id)) this.worker.postMessage({ id: job.id, done: true })
    return job.digest
  }

  cancel (job) {
    if (!this.pending.delete(job.id)) return
    this.worker.postMessage({ id: job.id, cancel: true })
    this.#idle()
  }

  // The SHA-256 (hex) of bytes the caller keeps, hashed on the thread from copies; inline
  // if the thread fails.
  async digestOf (buffer) {
    const job = this.begin()
    try {
      const inFlight = []
      for (let offset = 0; offset < buffer.length; offset += PIECE) {
        if (inFlight.length >= PIECES_AHEAD) await inFlight.shift()
        inFlight.push(this.update(job, new Uint8Array(buffer.subarray(offset, offset + PIECE)), { ack: true }))
      }
      return await this.finish(job)
    } catch {
      this.cancel(job)
      return sha256Of(buffer)
    }
  }

  // Resolves to the position of the first chunk record that does not match its digest,
  // or -1. The records are handed over: the caller must not use them afterwards.
  // Rejects if the thread fails.
  checkChunks (keys, records) {
    if (!this.worker) this.#start()
    const id = this.nextId++
    const checked = new Promise((resolve, reject) => this.pending.set(id, { resolve, reject, acks: [] }))
    this.worker.ref()
    const own = records.map((r) => (r.byteOffset === 0 && r.byteLength === r.buffer.byteLength && !(r.buffer instanceof SharedArrayBuffer) ? r : new Uint8Array(r)))
    this.worker.postMessage({ id, keys, records: own }, own.map((r) => r.buffer))
    return checked
  }

  #start () {
    this.worker = new Worker(path.join(__dirname, 'digest-thread.js'))
    this.worker.unref()
    this.worker.on('message', ({ id, digest, acked, bad }) => {
      const job = this.pending.get(id)
      if (!job) return
      if (acked) return job.acks.shift()()
      this.pending.delete(id)
      this.#idle()
      job.resolve(bad ?? digest)
    })
    const worker = this.worker
    this.worker.on('error', (err) => this.#fail(worker, err))
    this.worker.on('exit', () => this.#fail(worker, new Error('the digest worker stopped')))
  }

  #idle () {
    if (this.pending.size === 0 && this.worker) this.worker.unref()
  }

  #fail (worker, err) {
    if (this.worker !== worker) return
    this.worker = undefined
    for (const job of this.pending.values()) job.reject(err)
    this.pending.clear()
  }

  async close () {
    const worker = this.worker
    if (!worker) return
    this.#fail(worker, new Error('the store is closed'))
    await worker.terminate()
  }
}

module.exports = { Digester, OFFLOAD_DIGEST_BYTES }

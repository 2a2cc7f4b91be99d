'use strict'

const path = require('node:path')
const { Worker } = require('node:worker_threads')

// SHA-256 on a worker thread, so a whole-file read can hash while the main thread
// copies (perf/throughput.js: the check on the main thread made readFile of 128 MiB
// about 1.5x slower). Started on first use, unref'd whenever no digest is pending so it
// never keeps the process alive, and terminated by close(). If the worker dies, the
// jobs it held reject and the next job starts a new one: callers hash inline instead.
class Digester {
  constructor () {
    this.worker = undefined
    this.pending = new Map() // id -> { resolve, reject }
    this.nextId = 0
  }

  begin () {
    if (!this.worker) this.#start()
    const id = this.nextId++
    const job = { id, digest: undefined }
    job.digest = new Promise((resolve, reject) => this.pending.set(id, { resolve, reject }))
    job.digest.catch(() => {}) // a job may be cancelled and never awaited
    this.worker.ref()
    return job
  }

  // Hands `data` over to the worker: the caller must not use it afterwards.
  update (job, data) {
    if (!this.pending.has(job.id)) return // failed or cancelled: its digest rejects
    const whole = data.byteOffset === 0 && data.byteLength === data.buffer.byteLength && !(data.buffer instanceof SharedArrayBuffer)
    const own = whole ? data : new Uint8Array(data) // structured clone would copy a whole slab
    this.worker.postMessage({ id: job.id, data: own }, [own.buffer])
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

  #start () {
    this.worker = new Worker(path.join(__dirname, 'digest-thread.js'))
    this.worker.unref()
    this.worker.on('message', ({ id, digest }) => {
      const job = this.pending.get(id)
      if (!job) return
      this.pending.delete(id)
      this.#idle()
      job.resolve(digest)
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

module.exports = { Digester }

'use strict'

// Worker side of Digester: one SHA-256 per job id, fed in order.
const { parentPort } = require('node:worker_threads')
const { contentHash } = require('./keys')

const jobs = new Map()

parentPort.on('message', ({ id, data, ack, done, cancel }) => {
  if (cancel) return jobs.delete(id)
  let hash = jobs.get(id)
  if (!hash) jobs.set(id, (hash = contentHash()))
  if (data) hash.update(data)
  if (ack) parentPort.postMessage({ id, acked: true })
  if (done) {
    jobs.delete(id)
    parentPort.postMessage({ id, digest: hash.digest('hex') })
  }
})

'use strict'

// Worker side of Digester: one SHA-256 per job id, fed in order, or a check of chunk
// records against their digests.
const { parentPort } = require('node:worker_threads')
const { contentHash } = require('../api/keys')
const { intact } = require('../shard/chunk-record')

const jobs = new Map()

parentPort.on('message', ({ id, data, ack, done, cancel, keys, records }) => {
  if (cancel) return jobs.delete(id)
  if (keys) {
    const bad = keys.findIndex((key, i) => !intact(key, records[i]))
    return parentPort.postMessage({ id, bad })
  }
  let hash = jobs.get(id)
  if (!hash) jobs.set(id, (hash = contentHash()))
  if (data) hash.update(data)
  if (ack) parentPort.postMessage({ id, acked: true })
  if (done) {
    jobs.delete(id)
    parentPort.postMessage({ id, digest: hash.digest('hex') })
  }
})

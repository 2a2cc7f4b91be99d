'use strict'

const { Store } = require('./lib/store')
const errors = require('./lib/api/errors')
const { metricsText, CONTENT_TYPE } = require('./lib/api/prometheus')
const { DURATION_BUCKETS } = require('./lib/api/metrics')

// const store = kfs(dir, options): the store opens itself on first use.
function kfs (dir, options) {
  return new Store(dir, options)
}

// Removes the shadows of the stores this process opened read-only (doc/api.md). Their
// module is loaded only when called: a process that opened none (or only used stores
// through their holders) need not load it to start.
function removeShadowsSync () {
  require('./lib/leveldb/read-only').removeShadowsSync()
}

module.exports = kfs
module.exports.kfs = kfs
module.exports.Store = Store
module.exports.errors = errors
module.exports.removeShadowsSync = removeShadowsSync
// store.metrics()'s object in Prometheus's text format, and that format's Content-Type.
module.exports.metricsText = metricsText
module.exports.METRICS_CONTENT_TYPE = CONTENT_TYPE
// The upper bounds, in seconds, of store.metrics()'s duration buckets (the last, +Inf, left out).
module.exports.DURATION_BUCKETS = DURATION_BUCKETS

'use strict'

const { Store } = require('./lib/store')
const errors = require('./lib/api/errors')
const { removeShadowsSync } = require('./lib/leveldb/read-only')

// const store = kfs(dir, options): the store opens itself on first use.
function kfs (dir, options) {
  return new Store(dir, options)
}

module.exports = kfs
module.exports.kfs = kfs
module.exports.Store = Store
module.exports.errors = errors
module.exports.removeShadowsSync = removeShadowsSync

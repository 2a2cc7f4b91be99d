'use strict'

const crypto = require('node:crypto')
const { SHARD_COUNT } = require('../base/shard-names')

// shard = referenceId[0] XOR first byte of the key's routing hash. No index, no table:
// the same key always lands in the same shard of a given store. A store with fewer
// shards (a power of two, for benchmarks) keeps the low bits, which stay uniform.
function shardFor (referenceId, key, shardCount = SHARD_COUNT) {
  return (referenceId[0] ^ routingByte(key)) % shardCount
}

// The key bytes are hashed before routing because callers' keys cluster: a storage
// node's keys sit close to its own ID, which is also the store's reference ID. The
// digest comes back as a string: a Buffer result costs an allocation of its own.
function routingByte (key) {
  return crypto.hash('sha256', Buffer.from(key, 'hex'), 'latin1').charCodeAt(0)
}

module.exports = { shardFor, routingByte }

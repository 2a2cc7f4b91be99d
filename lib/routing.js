'use strict'

const { routingByte } = require('./keys')

const SHARD_COUNT = 256

// shard = referenceId[0] XOR first byte of the key's routing hash. No index, no table:
// the same key always lands in the same shard of a given store.
function shardFor (referenceId, key) {
  return referenceId[0] ^ routingByte(key)
}

module.exports = { shardFor, SHARD_COUNT }

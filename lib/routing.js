'use strict'

const { routingByte } = require('./keys')

const SHARD_COUNT = 256 // B, the design's number of shards

// shard = referenceId[0] XOR first byte of the key's routing hash. No index, no table:
// the same key always lands in the same shard of a given store. A store with fewer
// shards (a power of two, for benchmarks) keeps the low bits, which stay uniform.
function shardFor (referenceId, key, shardCount = SHARD_COUNT) {
  return (referenceId[0] ^ routingByte(key)) % shardCount
}

module.exports = { shardFor, SHARD_COUNT }

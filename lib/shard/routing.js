'use strict'

const crypto = require('node:crypto')

const SHARD_COUNT = 256 // B, the design's number of shards

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

// "042": how a shard is named in messages and on disk.
function shardName (index) {
  return String(index).padStart(3, '0')
}

// "042.s": the shard's directory in the store.
function shardDirName (index) {
  return `${shardName(index)}.s`
}

module.exports = { shardFor, routingByte, shardName, shardDirName, SHARD_COUNT }

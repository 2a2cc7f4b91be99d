'use strict'

const crypto = require('node:crypto')
const { SHARD_COUNT } = require('../base/shard-names')

// A key's shard: referenceId[0] XOR the first byte of its routing hash, no table. A store of
// fewer shards (a power of two) keeps the low bits, which stay uniform.
function shardFor (referenceId, key, shardCount = SHARD_COUNT) {
  return (referenceId[0] ^ routingByte(key)) % shardCount
}

// Hashed because callers' keys cluster: a storage node's keys sit close to its own ID, the
// store's reference ID. A string digest costs no Buffer.
function routingByte (key) {
  return crypto.hash('sha256', Buffer.from(key, 'hex'), 'latin1').charCodeAt(0)
}

module.exports = { shardFor, routingByte }

'use strict'

const SHARD_COUNT = 256 // B, the design's number of shards

function shardName (index) {
  return String(index).padStart(3, '0')
}

function shardDirName (index) {
  return `${shardName(index)}.s`
}

module.exports = { shardName, shardDirName, SHARD_COUNT }

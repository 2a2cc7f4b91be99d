'use strict'

const SHARD_COUNT = 256 // B, the design's number of shards

// "042": how a shard is named in messages and on disk.
function shardName (index) {
  return String(index).padStart(3, '0')
}

// "042.s": the shard's directory in the store.
function shardDirName (index) {
  return `${shardName(index)}.s`
}

module.exports = { shardName, shardDirName, SHARD_COUNT }

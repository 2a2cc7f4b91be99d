'use strict'

const crypto = require('node:crypto')
const errors = require('./errors')

// Key layout inside one shard (doc/format.md). System records start with '!', which
// sorts before every hex digit, so they never interleave with chunks.
const META = '!m!'
const PENDING = '!p!'
const ACCOUNT = '!a'
const FORMAT_VERSION = 1

const metaKey = (key) => META + key
const pendingKey = (version) => PENDING + version
const metaRange = () => ({ gt: META, lt: META + '\xff' })
const pendingRange = () => ({ gt: PENDING, lt: PENDING + '\xff' })

// A fresh version per write keeps an overwrite's chunks apart from the ones readers
// may still be streaming; the commit batch then swaps metadata and deletes the old.
function newVersion () {
  return crypto.randomBytes(8).toString('hex')
}

// Chunk keys: "<key> <version> <index>", the index zero-padded wide enough for the
// largest file a shard can hold, so one version's chunks are contiguous and sorted.
class ChunkKeys {
  constructor (shardCap, chunkSize) {
    this.width = String(Math.max(1, Math.ceil(shardCap / chunkSize)) - 1).length
  }

  key (key, version, index) {
    return `${key} ${version} ${String(index).padStart(this.width, '0')}`
  }

  range (key, version) {
    return { gt: `${key} ${version} `, lt: `${key} ${version} ~` }
  }
}

function encodeMeta (meta) {
  const record = { version: meta.version, size: meta.size, chunks: meta.chunks, sha256: meta.sha256, mtime: meta.mtime }
  if (meta.name !== undefined) record.name = meta.name
  return JSON.stringify(record)
}

function decodeMeta (value, where) {
  try {
    return JSON.parse(value)
  } catch (err) {
    throw errors.corrupt(where, 'it holds an unreadable metadata record', { cause: err })
  }
}

module.exports = {
  FORMAT_VERSION,
  ACCOUNT,
  META,
  PENDING,
  metaKey,
  pendingKey,
  metaRange,
  pendingRange,
  newVersion,
  ChunkKeys,
  encodeMeta,
  decodeMeta
}

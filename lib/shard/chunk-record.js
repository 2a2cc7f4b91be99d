'use strict'

const zlib = require('node:zlib')

// A chunk record (format 2 and 3, doc/format.md): the CRC32 of its key and data, 4 bytes
// big-endian, then the data; covering the key catches a chunk stored under another chunk's key.
// Format 1 chunks are bare (their metadata lacks `chunkDigest`). The only code that knows where
// the digest and the data lie in a record; it works on any Uint8Array, as the digest thread's.
const CHUNK_DIGEST = 'crc32' // the metadata's `chunkDigest` of a version whose chunks have one
const HEADER = 4

const recordLength = (length) => HEADER + length

// Bytes of a version's chunk records before the data: none in format 1.
const headerOf = (meta) => (meta.chunkDigest ? HEADER : 0)

// A record for `length` bytes of data, its header left for seal(). `own`: in memory of its own
// (a record kept and reused), not from Node's shared slab.
function newRecord (length, own) {
  return own ? Buffer.allocUnsafeSlow(HEADER + length) : Buffer.allocUnsafe(HEADER + length)
}

// Copies bytes start..end of `source` into the record's data from its byte `at`; returns how many.
function copyIn (record, at, source, start = 0, end = source.length) {
  return source.copy(record, HEADER + at, start, end)
}

const payload = (record) => record.subarray(HEADER)

// The record a payload() view was taken from.
const recordOf = (data) => Buffer.from(data.buffer, data.byteOffset - HEADER, data.length + HEADER)

function digest (chunkKey, record) {
  return zlib.crc32(record.subarray(HEADER), zlib.crc32(chunkKey))
}

function seal (chunkKey, record) {
  record.writeUInt32BE(digest(chunkKey, record), 0)
  return record
}

// Whether `record` is what seal() made of it under `chunkKey`.
function intact (chunkKey, record) {
  if (record.length < HEADER) return false
  const stored = ((record[0] << 24) | (record[1] << 16) | (record[2] << 8) | record[3]) >>> 0
  return stored === digest(chunkKey, record)
}

// Whether `record`, read from `chunkKey`, is there, holds `length` bytes, and is sealed.
const holds = (chunkKey, record, length) => record !== undefined && record.length === HEADER + length && intact(chunkKey, record)

module.exports = { CHUNK_DIGEST, HEADER, recordLength, headerOf, newRecord, copyIn, payload, recordOf, seal, intact, holds }

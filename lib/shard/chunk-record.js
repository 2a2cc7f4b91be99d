'use strict'

const zlib = require('node:zlib')

// A chunk record (format 2 and 3, doc/format.md): the CRC32 of its key and data, 4 bytes
// big-endian, then the data. Every read checks it before returning any byte of the
// chunk; covering the key too catches a chunk stored under another chunk's key. CRC32
// guards against damage, not tampering: the file's SHA-256 stays its content address.
// Files written by format 1 have bare chunks; their metadata lacks `chunkDigest`.
// This module is the only code that knows where the digest and the data lie in a
// record. It works on any Uint8Array, so the digest thread checks the records it is
// sent as they come.
const CHUNK_DIGEST = 'crc32' // the metadata's `chunkDigest` of a version whose chunks have one
const HEADER = 4

// The length of a record of `length` bytes of data.
const recordLength = (length) => HEADER + length

// How many bytes of a version's chunk records come before the data: none in format 1.
const headerOf = (meta) => (meta.chunkDigest ? HEADER : 0)

// A record for `length` bytes of data, its header left for seal(). `own`: in memory of
// its own (a record to be kept and reused); otherwise from Node's shared slab when small.
function newRecord (length, own) {
  return own ? Buffer.allocUnsafeSlow(HEADER + length) : Buffer.allocUnsafe(HEADER + length)
}

// Copies bytes start..end of `source` into the data of `record`, from its data's byte
// `at`; returns how many.
function copyIn (record, at, source, start = 0, end = source.length) {
  return source.copy(record, HEADER + at, start, end)
}

// The data of a record (a view, no copy).
const payload = (record) => record.subarray(HEADER)

// The record a payload() was taken from (a view of the same memory).
const recordOf = (data) => Buffer.from(data.buffer, data.byteOffset - HEADER, data.length + HEADER)

function digest (chunkKey, record) {
  return zlib.crc32(record.subarray(HEADER), zlib.crc32(chunkKey))
}

// Writes the record's digest into its header, now that its data is in place.
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

// Whether `record`, read from `chunkKey`, is there, holds `length` bytes of data, and
// is what seal() made of them.
const holds = (chunkKey, record, length) => record !== undefined && record.length === HEADER + length && intact(chunkKey, record)

module.exports = { CHUNK_DIGEST, HEADER, recordLength, headerOf, newRecord, copyIn, payload, recordOf, seal, intact, holds }

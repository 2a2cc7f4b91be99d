'use strict'

const { HEADER, intact, seal } = require('./chunk-record')
const errors = require('../api/errors')

// A file's head record (format 3, doc/format.md), stored under the file key itself:
// what a reader needs of the committed version, and, for a file of at most one chunk
// written in its commit, the file's data. A reader finds it with one get, from the key
// alone; the commit that makes a version writes its head and its metadata record in one
// batch, so a head is always that of the committed version.
//
//   0   4  CRC32 of the key and of every byte after these 4 (chunk-record.js)
//   4   1  record format: 3
//   5   1  flags: INLINE (the data follows the fields), TRASHED (reserved)
//   6   2  reserved, 0
//   8   8  version, the 16 hex characters as 8 bytes
//   16  8  size in bytes, big-endian
//   24  4  chunks
//   28  4  reserved, 0
//   32  8  mtime, ms since the epoch
//   40  8  expires, ms since the epoch; 0: never (reserved)
//   48  8  trashed at, ms since the epoch; 0: not in the trash (reserved)
//   56 32  SHA-256 of the content
//   88     the data, if INLINE
const FORMAT = 3
const FIELDS = 88
const INLINE = 1
const TRASHED = 2
const KNOWN_FLAGS = INLINE | TRASHED

function writeUint64 (record, value, at) {
  record.writeUInt32BE(Math.floor(value / 0x100000000), at)
  record.writeUInt32BE(value % 0x100000000, at + 4)
}

const readUint64 = (record, at) => record.readUInt32BE(at) * 0x100000000 + record.readUInt32BE(at + 4)

// The head of `meta`'s version, sealed under `key`. `data`: the file's bytes, when they
// go in the head (at most one chunk).
function encodeHead (key, meta, data) {
  const record = Buffer.allocUnsafe(FIELDS + (data ? data.length : 0))
  record.fill(0, HEADER, FIELDS)
  record[4] = FORMAT
  record[5] = (data ? INLINE : 0) | (meta.trashed ? TRASHED : 0)
  record.write(meta.version, 8, 8, 'hex')
  writeUint64(record, meta.size, 16)
  record.writeUInt32BE(meta.chunks, 24)
  writeUint64(record, meta.mtime, 32)
  writeUint64(record, meta.expires || 0, 40)
  writeUint64(record, meta.trashed || 0, 48)
  record.write(meta.sha256, 56, 32, 'hex')
  if (data) data.copy(record, FIELDS)
  return seal(key, record)
}

// The version a head record describes: the metadata a reader needs ({ key, version,
// size, chunks, sha256, chunkDigest, mtime, format: 3, inline }), and `data`, the file's bytes
// (a view of `record`) if they are in it. A head that fails its CRC32 (unless
// `unchecked`), or whose fields do not hold together, is damage of that file:
// EINTEGRITY naming the key.
function decodeHead (key, record, { unchecked = false } = {}) {
  if (record.length < FIELDS || record[4] !== FORMAT || (record[5] & ~KNOWN_FLAGS) !== 0) throw badHead(key, 'is not a head record of format 3')
  if (!unchecked && !intact(key, record)) throw badHead(key, 'does not match its CRC32')
  // Written by a kfs that reads these fields: served as live here, such a file could be
  // one its writer has removed.
  if ((record[5] & TRASHED) !== 0 || readUint64(record, 40) !== 0 || readUint64(record, 48) !== 0) throw errors.newerRecord(key, 'has an expiry time or a trash mark')
  const size = readUint64(record, 16)
  const chunks = record.readUInt32BE(24)
  const inline = (record[5] & INLINE) !== 0
  if (!Number.isSafeInteger(size) || (inline && (record.length - FIELDS !== size || chunks !== (size > 0 ? 1 : 0)))) throw badHead(key, 'holds fields that contradict each other')
  const meta = {
    key,
    version: record.toString('hex', 8, 16),
    size,
    chunks,
    sha256: record.toString('hex', 56, 88),
    chunkDigest: 'crc32',
    mtime: readUint64(record, 32),
    format: FORMAT
  }
  if (inline) meta.inline = true
  return { meta, data: inline ? record.subarray(FIELDS) : undefined }
}

function badHead (key, what) {
  return errors.integrity(key, `its head record ${what}`, { chunk: 0 })
}

module.exports = { encodeHead, decodeHead, HEAD_FIELDS: FIELDS, HEAD_FORMAT: FORMAT }

'use strict'

const { HEADER, intact, seal } = require('./chunk-record')
const errors = require('../api/errors')

// A file's head record, under the file key itself (doc/format.md, "Head records", lays out
// its bytes): what a reader needs of the committed version, found with one get, and the data
// of a file of at most one chunk written in its commit. A commit writes the head and the
// metadata record in one batch, so a head is always that of the committed version.
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

// The head of `meta`'s version, sealed under `key`; `data`: the file's bytes, if they go in it.
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

// { meta, data }: the metadata a reader needs of the version a head describes, and the file's
// bytes (a view of `record`) if they are in it. A head that fails its CRC32 (unless
// `unchecked`), or whose fields contradict each other, is EINTEGRITY naming the key.
function decodeHead (key, record, { unchecked = false } = {}) {
  if (record.length < FIELDS || record[4] !== FORMAT || (record[5] & ~KNOWN_FLAGS) !== 0) throw badHead(key, 'is not a head record of format 3')
  if (!unchecked && !intact(key, record)) throw badHead(key, 'does not match its CRC32')
  const trashed = readUint64(record, 48)
  const expires = readUint64(record, 40)
  const size = readUint64(record, 16)
  const chunks = record.readUInt32BE(24)
  const inline = (record[5] & INLINE) !== 0
  if (((record[5] & TRASHED) !== 0) !== (trashed !== 0)) throw badHead(key, 'has a trash flag and time that contradict each other')
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
  if (expires !== 0) meta.expires = expires
  if (trashed !== 0) meta.trashed = trashed
  return { meta, data: inline ? record.subarray(FIELDS) : undefined }
}

function badHead (key, what) {
  return errors.integrity(key, `its head record ${what}`, { chunk: 0 })
}

module.exports = { encodeHead, decodeHead, HEAD_FIELDS: FIELDS, HEAD_FORMAT: FORMAT }

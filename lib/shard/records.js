'use strict'

const crypto = require('node:crypto')
const { shardName } = require('../base/shard-names')
const { CHUNK_DIGEST } = require('./chunk-record')
const { HEAD_FORMAT } = require('./head-record')
const errors = require('../api/errors')

// The records inside one shard (doc/format.md). System records start with '!', which sorts
// before every hex digit, so they never interleave with chunks.
const ACCOUNT = '!a'
const HEADS = '!h' // every file has a head record: nothing left to upgrade (head-upgrade.js)
const DAMAGE = '!d!'
const DEAD = '!x!'
const META = '!m!'
const PENDING = '!p!'
const EXPIRY_INDEX = '!e!'
const TRASH_INDEX = '!t!'
const WHOLE = { from: '!', to: '\xff' } // every record of a shard
const FILES = { gte: '0', lt: 'g' } // every head and chunk record: file keys are hex

const metaKey = (key) => META + key
const pendingKey = (version) => PENDING + version
const damageKey = (time, n = 0) => `${DAMAGE}${new Date(time).toISOString()}.${n}`
const deadKey = (key, version) => `${DEAD}${key} ${version}`
// The expiry index: one record per file with an expiry, its value the version it names, in
// order of expiry (13 digits hold every time args.js accepts), so that the files due are the
// first records of the range.
const EXPIRES_DIGITS = 13
const expiryKey = (expires, key) => `${EXPIRY_INDEX}${String(expires).padStart(EXPIRES_DIGITS, '0')} ${key}`
// The records of the files due at `now`: every one expiring at or before it.
const dueRange = (now) => ({ gt: EXPIRY_INDEX, lt: `${EXPIRY_INDEX}${String(now).padStart(EXPIRES_DIGITS, '0')}!` })
const expiryRange = () => prefixRange(EXPIRY_INDEX)
// { expires, key } of an expiry record's key.
function parseExpiryKey (id) {
  const space = id.indexOf(' ', EXPIRY_INDEX.length)
  return { expires: Number(id.slice(EXPIRY_INDEX.length, space)), key: id.slice(space + 1) }
}
// Whether `meta`'s version has expired at `now`: from then on, it is gone to every reader.
const expired = (meta, now) => meta.expires !== undefined && meta.expires <= now
// The trash index: one record per trashed file, its value the version's size, in order of
// trash time, so that a shard's trash newer than the store's restore time (doc/format.md,
// "Trash") is one range, its oldest first.
const trashKey = (trashed, key) => `${TRASH_INDEX}${String(trashed).padStart(EXPIRES_DIGITS, '0')} ${key}`
// The records of the files trashed after `after` and before `before` (ms; undefined: all).
const trashRange = (after, before) => ({
  gt: `${TRASH_INDEX}${String(after).padStart(EXPIRES_DIGITS, '0')}!`,
  lt: before === undefined ? `${TRASH_INDEX}\xff` : `${TRASH_INDEX}${String(before).padStart(EXPIRES_DIGITS, '0')}`
})
// { trashed, key } of a trash record's key.
function parseTrashKey (id) {
  const space = id.indexOf(' ', TRASH_INDEX.length)
  return { trashed: Number(id.slice(TRASH_INDEX.length, space)), key: id.slice(space + 1) }
}
// Whether `meta`'s version is in the trash: trashed after the store's last restore
// (`restoredAt`, ms). A trash mark at or before it is one that restore brought back.
const trashed = (meta, restoredAt) => meta.trashed !== undefined && meta.trashed > restoredAt
// Whether readers find no file in `meta`'s version: expired at `now`, or in the trash.
const gone = (meta, now, restoredAt) => expired(meta, now) || trashed(meta, restoredAt)
// A shard's trash figures with nothing in the trash after `restoredAt`: files, bytes, the
// earliest and latest trash times.
const noTrash = (restoredAt) => ({ files: 0, bytes: 0, first: undefined, last: undefined, restoredAt })
// The note of a head rewritten by trash(), its data now dead bytes: an id of its own per mark.
const trashedHeadKey = (key, version, time) => `${DEAD}${key} ${version} trashed ${time}`
// The note of a version's chunk moved into its head (head-upgrade.js): an id of its own, so
// that a removal of the version, noted under deadKey, is never forgotten with it.
const movedKey = (key, version) => `${DEAD}${key} ${version} moved`
const prefixRange = (prefix) => ({ gt: prefix, lt: prefix + '\xff' })
const metaRange = () => prefixRange(META)
const pendingRange = () => prefixRange(PENDING)
const damageRange = () => prefixRange(DAMAGE)
const deadRange = () => prefixRange(DEAD)

// A fresh version per write keeps an overwrite's chunks apart from those readers may still be
// streaming. Drawn from random bytes refilled 512 versions at a time: a call into the system's
// random source per version made small-file writes measurably slower (doc/performance.md).
const versionPool = Buffer.alloc(8 * 512)
let versionOffset = versionPool.length
function newVersion () {
  if (versionOffset === versionPool.length) {
    crypto.randomFillSync(versionPool)
    versionOffset = 0
  }
  versionOffset += 8
  return versionPool.toString('hex', versionOffset - 8, versionOffset)
}

// Chunk keys: "<key> <version> <index>", the index zero-padded wide enough for the largest file
// a shard can hold, so that a version's chunks are contiguous and sorted.
class ChunkKeys {
  constructor (shardCap, chunkSize) {
    this.chunkSize = chunkSize
    this.width = String(Math.max(1, Math.ceil(shardCap / chunkSize)) - 1).length
  }

  key (key, version, index) {
    return `${key} ${version} ${String(index).padStart(this.width, '0')}`
  }

  range (key, version) {
    return { gt: `${key} ${version} `, lt: `${key} ${version} ~` }
  }
}

// The metadata of a version about to be committed, as this kfs writes it: chunk digests and a
// head record.
function newMeta ({ key, name, version, size, chunks, sha256, expires }) {
  const meta = { key, version, size, chunks, sha256, chunkDigest: CHUNK_DIGEST, mtime: Date.now(), name, format: HEAD_FORMAT }
  if (expires !== undefined) meta.expires = expires
  return meta
}

function encodeMeta (meta) {
  const record = { version: meta.version, size: meta.size, chunks: meta.chunks, sha256: meta.sha256, mtime: meta.mtime }
  if (meta.chunkDigest !== undefined) record.chunkDigest = meta.chunkDigest
  if (meta.format !== undefined) record.format = meta.format
  if (meta.inline) record.inline = true
  if (meta.name !== undefined) record.name = meta.name
  if (meta.expires !== undefined) record.expires = meta.expires
  if (meta.trashed !== undefined) record.trashed = meta.trashed
  return JSON.stringify(record)
}

// A metadata record that does not parse, or lacks what reading needs, is ECORRUPT naming the
// shard and the key.
function decodeMeta (value, shard, key) {
  let meta
  try {
    meta = JSON.parse(value)
  } catch (err) {
    throw badMeta(shard, key, err)
  }
  const valid = meta && typeof meta.version === 'string' && Number.isSafeInteger(meta.size) && meta.size >= 0 &&
    Number.isSafeInteger(meta.chunks) && meta.chunks >= 0 && typeof meta.sha256 === 'string' &&
    (meta.chunkDigest === undefined || meta.chunkDigest === CHUNK_DIGEST) &&
    (meta.format === undefined || (meta.format === HEAD_FORMAT && meta.chunkDigest === CHUNK_DIGEST)) &&
    (meta.inline === undefined || (meta.inline === true && meta.format === HEAD_FORMAT && meta.chunks <= 1)) &&
    (meta.expires === undefined || (Number.isSafeInteger(meta.expires) && meta.expires > 0)) &&
    (meta.trashed === undefined || (Number.isSafeInteger(meta.trashed) && meta.trashed > 0))
  if (!valid) throw badMeta(shard, key)
  return { key, ...meta }
}

// A damage note that cannot be read is still damage to report.
function decodeNote (value) {
  try {
    const note = JSON.parse(value)
    if (note && Array.isArray(note.dropped) && Array.isArray(note.pending)) return note
  } catch {
    // reported below
  }
  return { at: 'an unknown time', dropped: [`an unreadable damage note: ${JSON.stringify(String(value).slice(0, 200))}`], pending: [] }
}

function badMeta (shard, key, cause) {
  return errors.corrupt(`shard ${shardName(shard)}`, `the metadata record of ${key} is unreadable; kfs repair ${shard} drops it`, { shard, key, cause })
}

module.exports = {
  ACCOUNT,
  HEADS,
  DAMAGE,
  DEAD,
  META,
  PENDING,
  EXPIRY_INDEX,
  TRASH_INDEX,
  WHOLE,
  FILES,
  metaKey,
  pendingKey,
  damageKey,
  deadKey,
  movedKey,
  expiryKey,
  dueRange,
  expiryRange,
  parseExpiryKey,
  expired,
  trashKey,
  trashRange,
  parseTrashKey,
  trashed,
  gone,
  noTrash,
  trashedHeadKey,
  metaRange,
  pendingRange,
  damageRange,
  deadRange,
  newVersion,
  ChunkKeys,
  newMeta,
  encodeMeta,
  decodeMeta,
  decodeNote
}

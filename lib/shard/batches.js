'use strict'

const records = require('./records')
const chunkRecord = require('./chunk-record')
const { encodeHead } = require('./head-record')

const NO_BYTES = Buffer.alloc(0)

// The operations of the batches that change a shard's files (doc/format.md): a version's
// chunks, its commit, a file's removal. `chunkKeys`: the shard's ChunkKeys.

// Puts `chunks`, records (chunk-record.js) sealed here, as chunks firstIndex... of a version.
function putChunks (ops, chunkKeys, key, version, firstIndex, chunks) {
  chunks.forEach((record, i) => {
    const chunkKey = chunkKeys.key(key, version, firstIndex + i)
    ops.push({ type: 'put', key: chunkKey, value: chunkRecord.seal(chunkKey, record) })
  })
}

// { ops, head }: the batch that makes `meta` the version of its key, replacing `old`, but for
// the accounting. `inline`: its chunks if not written before; one such chunk goes in its head.
function commitOps (chunkKeys, meta, inline, old) {
  const ops = []
  meta.inline = inline.length === meta.chunks && meta.chunks <= 1
  const data = !meta.inline ? undefined : inline.length ? chunkRecord.payload(inline[0]) : NO_BYTES
  const head = encodeHead(meta.key, meta, data)
  // First: the new version's expiry record may have the key of the old one's.
  if (old) removeVersion(ops, chunkKeys, meta.key, old)
  if (!meta.inline) putChunks(ops, chunkKeys, meta.key, meta.version, 0, inline)
  ops.push({ type: 'put', key: meta.key, value: head })
  ops.push({ type: 'put', key: records.metaKey(meta.key), value: records.encodeMeta(meta) })
  if (meta.chunks > inline.length) ops.push({ type: 'del', key: records.pendingKey(meta.version) })
  if (meta.expires !== undefined) ops.push({ type: 'put', key: records.expiryKey(meta.expires, meta.key), value: meta.version })
  return { ops, head }
}

// Deletes a file: its metadata, its head record, and its version (removeVersion).
function removeFile (ops, chunkKeys, meta) {
  ops.push({ type: 'del', key: records.metaKey(meta.key) })
  if (meta.format !== undefined) ops.push({ type: 'del', key: meta.key })
  removeVersion(ops, chunkKeys, meta.key, meta)
}

// Deletes a version's chunks, its expiry and trash records, and notes its size as dead space
// (dead-space.js).
function removeVersion (ops, chunkKeys, key, meta) {
  if (meta.expires !== undefined) ops.push({ type: 'del', key: records.expiryKey(meta.expires, key) })
  if (meta.trashed !== undefined) ops.push({ type: 'del', key: records.trashKey(meta.trashed, key) })
  if (!meta.inline) for (let i = 0; i < meta.chunks; i++) ops.push({ type: 'del', key: chunkKeys.key(key, meta.version, i) })
  if (meta.size > 0) ops.push({ type: 'put', key: records.deadKey(key, meta.version), value: String(meta.size) })
}

// { ops, head }: the batch that marks `meta`'s version trashed at `time` (its head, with
// `data` if the head holds it, its metadata, its trash record), an earlier mark's record
// deleted. The old head's data becomes dead bytes.
function trashOps (meta, time, data) {
  const marked = { ...meta, trashed: time }
  const ops = []
  if (meta.trashed !== undefined) ops.push({ type: 'del', key: records.trashKey(meta.trashed, meta.key) })
  const head = meta.format === undefined ? undefined : encodeHead(meta.key, marked, data)
  if (head) ops.push({ type: 'put', key: meta.key, value: head })
  ops.push({ type: 'put', key: records.metaKey(meta.key), value: records.encodeMeta(marked) })
  ops.push({ type: 'put', key: records.trashKey(time, meta.key), value: String(meta.size) })
  if (data && data.length > 0) ops.push({ type: 'put', key: records.trashedHeadKey(meta.key, meta.version, time), value: String(data.length) })
  return { ops, head }
}

module.exports = { removeFile, putChunks, commitOps, removeVersion, trashOps }

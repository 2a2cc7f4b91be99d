'use strict'

const { WHOLE } = require('./records')

// Removed versions are compacted away in key ranges holding about this much of them: one table
// file (lib/leveldb/open.js, DEFAULTS.maxFileSize). LevelDB compacts whole table files, so smaller
// pieces rewrite the same files again (doc/performance.md).
const RECLAIM_PIECE = 32 * 1024 * 1024

// The key ranges to compact to reclaim a shard's dead versions, each holding about RECLAIM_PIECE
// bytes of them, so that no compaction holds LevelDB's one background thread for long. dead: the
// shard's dead notes in key order (scans.deadVersions); shardBytes: its tables and memtables.
// Returns [{ from, to, bytes, ids, tables }]: the dead bytes in the piece, the notes it reclaims (a
// large version's note belongs to each of its pieces) and, for the whole shard, shardBytes. A shard
// of at most a piece is one piece, the whole shard. LevelDB's compaction of a range leaves the
// deepest table holding part of it, and a file written and removed before its shard flushed lies in
// one flushed table, often the deepest of a small shard. The whole shard's range reaches the
// accounting record, which every such table holds: each is rewritten.
function planReclaim (dead, chunkKeys, shardBytes) {
  if (shardBytes <= RECLAIM_PIECE) return dead.length ? [{ ...WHOLE, tables: shardBytes, bytes: dead.reduce((sum, d) => sum + d.bytes, 0), ids: dead.map((d) => d.id) }] : []
  const pieces = []
  let group
  let reached // the file key the last piece reaches into
  // A version's first piece starts at its file key, where a head holding its data lies.
  const start = (key, from) => (reached === key ? from : key)
  for (const { id, prefix, bytes } of dead) {
    const [key, version] = prefix.split(' ')
    if (bytes > RECLAIM_PIECE) {
      if (group) pieces.push(group)
      group = undefined
      const chunks = Math.ceil(bytes / chunkKeys.chunkSize)
      const step = Math.max(1, Math.floor(RECLAIM_PIECE / chunkKeys.chunkSize))
      for (let i = 0; i < chunks; i += step) {
        const last = Math.min(chunks, i + step) - 1
        const held = Math.min(bytes, (last + 1) * chunkKeys.chunkSize) - i * chunkKeys.chunkSize
        const from = chunkKeys.key(key, version, i)
        pieces.push({ from: i === 0 ? start(key, from) : from, to: chunkKeys.key(key, version, last), bytes: held, ids: [id] })
      }
    } else if (group && group.bytes + bytes <= RECLAIM_PIECE) {
      group.to = `${prefix} ~`
      group.bytes += bytes
      group.ids.push(id)
    } else {
      if (group) pieces.push(group)
      group = { from: start(key, `${prefix} `), to: `${prefix} ~`, bytes, ids: [id] }
    }
    reached = key
  }
  if (group) pieces.push(group)
  return pieces
}

module.exports = { planReclaim }

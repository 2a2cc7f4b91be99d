'use strict'

const { WHOLE } = require('./records')

// Removed versions are compacted away in key ranges holding about this much of them:
// one table file (lib/leveldb/open.js, DEFAULTS.maxFileSize). LevelDB compacts whole table
// files, so smaller pieces rewrite the same files again: reclaiming then fell behind a
// steady writer, and a write after a large unlink waited longer, not shorter
// (doc/performance.md).
const RECLAIM_PIECE = 32 * 1024 * 1024

// What reclaiming a shard's dead versions takes: key ranges to compact, each holding
// about RECLAIM_PIECE bytes of them (a large version in several pieces, small
// neighbours together), so that no single compaction holds LevelDB's one background
// thread for long. dead: [{ id, prefix: '<key> <version>', bytes }], the shard's dead
// notes in key order; chunkKeys: its ChunkKeys; shardBytes: what the shard holds, its
// tables and its memtables. Returns pieces: [{ from, to, bytes, ids, tables }], the
// bytes of dead versions in the piece, the notes it reclaims (a large version's note
// belongs to each of its pieces) and, for the whole shard, shardBytes.
//
// A shard holding no more than a piece is one piece, the whole shard. LevelDB's
// compaction of a range rewrites the range's tables at every level but the deepest
// holding part of it, and flushes a memtable into one table at level 0, 1 or 2, puts
// and deletes together: a file written and removed before its shard flushed lies in
// that table, which in a small shard is often the deepest in the file's range, so
// compacting the range alone leaves it. The whole shard's range reaches the accounting
// record, which every flushed table of commits or unlinks holds and an older table
// holds at a deeper level (a new shard's own is at level 2): every such table is
// rewritten.
function planReclaim (dead, chunkKeys, shardBytes) {
  if (shardBytes <= RECLAIM_PIECE) return dead.length ? [{ ...WHOLE, tables: shardBytes, bytes: dead.reduce((sum, d) => sum + d.bytes, 0), ids: dead.map((d) => d.id) }] : []
  const pieces = []
  let group
  let reached // the file key the last piece reaches into
  // A version's first piece starts at its file key, where a head that held its data
  // lies, unless a piece before already reaches into that key.
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

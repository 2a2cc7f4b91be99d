'use strict'

// Removed versions are compacted away in key ranges holding about this much of them:
// one table file (lib/leveldb/leveldb.js maxFileSize). LevelDB compacts whole table
// files, so smaller pieces rewrite the same files again: reclaiming then fell behind a
// steady writer, and a write after a large unlink waited longer, not shorter
// (doc/performance.md).
const RECLAIM_PIECE = 32 * 1024 * 1024

// What reclaiming a shard's dead versions takes: key ranges to compact, each holding
// about RECLAIM_PIECE bytes of them (a large version in several pieces, small
// neighbours together), so that no single compaction holds LevelDB's one background
// thread for long. dead: [{ id, prefix: '<key> <version>', bytes }], the shard's dead
// notes in key order; chunkKeys: its ChunkKeys. Resolves to { pieces: [{ from, to }],
// ids (the notes), bytes }.
function planReclaim (dead, chunkKeys) {
  const pieces = []
  let group
  for (const { prefix, bytes } of dead) {
    if (bytes > RECLAIM_PIECE) {
      if (group) pieces.push(group)
      group = undefined
      const [key, version] = prefix.split(' ')
      const chunks = Math.ceil(bytes / chunkKeys.chunkSize)
      const step = Math.max(1, Math.floor(RECLAIM_PIECE / chunkKeys.chunkSize))
      for (let i = 0; i < chunks; i += step) {
        pieces.push({ from: chunkKeys.key(key, version, i), to: chunkKeys.key(key, version, Math.min(chunks, i + step) - 1) })
      }
    } else if (group && group.bytes + bytes <= RECLAIM_PIECE) {
      group.to = `${prefix} ~`
      group.bytes += bytes
    } else {
      if (group) pieces.push(group)
      group = { from: `${prefix} `, to: `${prefix} ~`, bytes }
    }
  }
  if (group) pieces.push(group)
  return { pieces: pieces.map(({ from, to }) => ({ from, to })), ids: dead.map((d) => d.id), bytes: dead.reduce((sum, d) => sum + d.bytes, 0) }
}

module.exports = { planReclaim }

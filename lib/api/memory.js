'use strict'

const KiB = 1024
const MiB = 1024 * KiB

// The store's memory budget (options.memory), shared out. Writers' data not yet in
// LevelDB (at most `writes`), readers' read-ahead (`readAhead`, plus a chunk's share
// for each reader past it: read-ahead.js), every open shard's block cache (cacheEach()),
// and LevelDB's memtables, which get whatever the others leave: the shards are
// flushed, fullest first, whenever all of it together passes `memory`
// (shard/memtables.js). doc/about.md, "Memory", gives the whole formula.
const MEMORY = 128 * MiB
const MIN_MEMORY = 16 * MiB
// One shard's block cache at most: LevelDB's own default, which a single-shard store
// (the benchmarks' vanilla engine) keeps. LevelDB caches blocks of the tables it reads
// with pread only, past the 1,000 it maps per process, so a small one costs little.
const MAX_CACHE = 8 * MiB
const MIN_CACHE = 32 * KiB

function memoryParts (memory) {
  return { writes: Math.floor(memory / 4), readAhead: Math.floor(memory / 4) }
}

// Each of `openShards` shards' block cache: a sixteenth of the budget shared out.
function cacheEach (memory, openShards) {
  return Math.max(MIN_CACHE, Math.min(MAX_CACHE, Math.floor(memory / 16 / openShards)))
}

module.exports = { memoryParts, cacheEach, MEMORY, MIN_MEMORY }

'use strict'

const MiB = 1024 * 1024

// The store's memory budget (options.memory), shared out: writers' data not yet in
// LevelDB, the chunks they are filling included (`writes`, passed only by what writers
// stalled by their callers hold: write-budget.js), readers' read-ahead (`readAhead`, plus MIN_EACH for each
// reader past it: read-ahead.js), and LevelDB's memtables, which get what the others
// leave (shard/memtables.js). LevelDB's block caches hold nothing: kfs reads with
// fillCache off, and LevelDB never caches the blocks of a table it maps. doc/about.md,
// "Memory", gives the whole formula.
const MEMORY = 128 * MiB
const MIN_MEMORY = 16 * MiB

function memoryParts (memory) {
  return { writes: Math.floor(memory / 4), readAhead: Math.floor(memory / 4) }
}

module.exports = { memoryParts, MEMORY, MIN_MEMORY }

'use strict'

const MiB = 1024 * 1024

// The store's memory budget (options.memory), shared out: writers' data not yet in
// LevelDB (`writes`: write-budget.js), readers' read-ahead (`readAhead`: read-ahead.js),
// and LevelDB's memtables, which get what the others leave (shard/memtables.js). Block
// caches hold nothing: kfs reads with fillCache off. doc/about.md, "Memory", gives the
// whole formula.
const MEMORY = 128 * MiB
const MIN_MEMORY = 16 * MiB

function memoryParts (memory) {
  return { writes: Math.floor(memory / 4), readAhead: Math.floor(memory / 4) }
}

module.exports = { memoryParts, MEMORY, MIN_MEMORY }

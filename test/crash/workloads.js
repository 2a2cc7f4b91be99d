'use strict'

// The crash-state workloads (harness.js): short runs of what kfs does to a
// filesystem, each recorded whole. Steps (workload.js): ['write', key, bytes, expiresIn],
// ['put', bytes, expiresIn], ['unlink', key], ['trash', key], ['restore'], ['empty'],
// ['compact'], ['collect', files], ['together', ...steps] (at once). `prepare` runs before recording, on
// the real disk, and is durable when recording starts.
const KiB = 1024
const MiB = 1024 * KiB

// Few shards and a small reserve: the same code paths in less data, so that more
// states are checked in the time.
const synced = { sync: true, shardCount: 2, diskReserve: 64 * KiB }
const unsynced = { ...synced, sync: false }

// Writes of 1 KiB to 3 MiB, about 14 MiB in all: each shard's 4 MiB memtable fills
// more than once, so LevelDB starts new logs during the run.
const sizes = [KiB, 700 * KiB, 3 * MiB, 64 * KiB, 1536 * KiB, 5 * KiB, 2 * MiB, 300 * KiB, 3 * MiB, 20 * KiB, 2560 * KiB]
const writes = sizes.map((size, i) => ['write', `f${i}`, size])

// Writes over two files kept from before, one overwritten with a larger version, one
// unlinked: what the synced, unsynced and raw LevelDB workloads do.
const overwrites = {
  prepare: [['write', 'f0', 3 * MiB], ['write', 'old', 100 * KiB]],
  steps: [...writes, ['write', 'f2', 5 * MiB], ['unlink', 'old'], ['write', 'f0', 2 * KiB]]
}

const workloads = [
  {
    // kfs makes the store and the directories above it.
    name: 'new store',
    engine: 'kfs',
    store: 'a/b/store',
    options: { ...synced, shardCount: 4 },
    steps: [['write', 'k1', KiB], ['put', 300 * KiB], ['write', 'k1', 2 * MiB], ['put', 3 * MiB], ['unlink', 'k1']]
  },
  {
    // A new store's shards: the first made from the template, the next from spares.
    name: 'new shards',
    engine: 'kfs',
    store: 'store',
    options: { ...synced, shardCount: 16 },
    steps: Array.from({ length: 8 }, (_, i) => ['write', `s${i}`, 4 * KiB])
  },
  {
    name: 'synced writes',
    engine: 'kfs',
    store: 'store',
    options: synced,
    ...overwrites,
    steps: [...overwrites.steps, ['put', 2 * MiB]]
  },
  {
    name: 'writes at once',
    engine: 'kfs',
    store: 'store',
    options: synced,
    prepare: [['write', 'p', 2 * MiB]],
    steps: [
      ['together', ...writes.slice(0, 4)],
      ['together', ['write', 'p', 3 * MiB], ...writes.slice(4, 8)],
      ['together', ['unlink', 'f1'], ...writes.slice(8)],
      // Past 4 batches a write flushes the memtable before its commit: the others'
      // synced writes meet that compaction.
      ['together', ['write', 'big', 5 * MiB], ['write', 's1', 32 * KiB], ['put', 200 * KiB], ['unlink', 'f2'], ['write', 's2', 600 * KiB]]
    ]
  },
  {
    name: 'unsynced writes',
    engine: 'kfs',
    store: 'store',
    options: unsynced,
    ...overwrites
  },
  {
    // Overwritten and removed files' space reclaimed by compact().
    name: 'reclaiming',
    engine: 'kfs',
    store: 'store',
    options: synced,
    prepare: [...writes.slice(0, 6)],
    steps: [
      ['write', 'f2', 2 * MiB], ['unlink', 'f1'], ['unlink', 'f4'], ['compact'], ['write', 'f1', 1024 * KiB],
      // Synced writes and unlinks during compactions of their shards.
      ['together', ['compact'], ['write', 'r1', 64 * KiB], ['unlink', 'f3'], ['write', 'r2', 900 * KiB], ['write', 'f0', 300 * KiB]]
    ]
  },
  {
    // A store of format 2, opened by format 3, which rewrites its format.json, then
    // written with files of one chunk, whose data goes in their head records: files
    // without heads overwritten and unlinked, files with heads overwritten by one of one
    // chunk, by a larger one and back, and unlinked.
    name: 'pieces, upgraded from format 2',
    engine: 'kfs',
    store: 'store',
    options: synced,
    prepare: [['write', 'o0', 62068], ['write', 'o1', 300 * KiB], ['write', 'o2', KiB]],
    older: 2,
    steps: [
      ['together', ...Array.from({ length: 5 }, (_, i) => ['write', `q${i}`, 4 * KiB + i * 10000])],
      ['write', 'o0', 8 * KiB], ['unlink', 'o2'], ['write', 'o1', 62068], ['write', 'q0', 200 * KiB],
      ['together', ['write', 'q0', 62068], ['unlink', 'q1'], ['put', 62068], ['write', 'q2', 0]]
    ]
  },
  {
    // Expired files removed by the store itself, in batches of up to 1,000 that are never
    // synced, one shard holding all: a power cut may undo any of them, and must never
    // make an expired file readable again, nor lose a live one or a synced write made
    // meanwhile. The pieces expire 8 s after they are written, after the prepared store
    // closed: the recorded run collects them.
    name: 'expiry collection',
    engine: 'kfs',
    store: 'store',
    options: { ...synced, shardCount: 1 },
    prepare: [
      ['together', ...Array.from({ length: 2100 }, (_, i) => ['write', `e${i}`, 100 + i, 8000])],
      ['write', 'kept', 5 * KiB, 3600 * 1000], ['write', 'live', 200 * KiB]
    ],
    steps: [['together', ['collect', 2100], ['write', 'during', 64 * KiB]], ['write', 'after', 2 * KiB]]
  },
  {
    // The trash: files trashed and emptied, then trashed and restored, one trashed and
    // written again, trash beside a write; the last restore comes after an emptying,
    // which it must not undo.
    name: 'trash',
    engine: 'kfs',
    store: 'store',
    options: synced,
    steps: [
      ...[KiB, 300 * KiB, 62068, 2 * MiB, 5 * KiB, 700 * KiB].map((size, i) => ['write', `t${i}`, size]),
      ['trash', 't0'], ['trash', 't1'], ['trash', 't2'], ['empty'],
      ['trash', 't3'], ['trash', 't4'], ['restore'],
      ['trash', 't5'], ['write', 't5', 10 * KiB], ['trash', 't4'], ['together', ['trash', 't3'], ['write', 't6', KiB]],
      ['empty'], ['write', 't7', 62068], ['trash', 't7'], ['restore']
    ]
  },
  {
    // One raw LevelDB doing synced puts and deletes: what LevelDB alone promises.
    name: 'raw LevelDB',
    engine: 'leveldb',
    store: 'db',
    control: true,
    ...overwrites
  }
]

module.exports = { workloads }

'use strict'

const fs = require('node:fs')
const { LevelDb } = require('../leveldb/leveldb')
const { Shard } = require('../shard/shard')
const { createShard } = require('../shard/create')
const { shardName } = require('../base/shard-names')
const records = require('../shard/records')
const { checkFile } = require('./file-check')
const args = require('../api/args')
const errors = require('../api/errors')

// `ctx` is { shards, chunkSize, shardCount } of an open store; every shard visit is a
// lease, an operation the store's close() waits for.

// Runs LevelDB's repair on one shard, then keeps only the files that are whole and
// rebuilds the shard's accounting. The shard is held exclusively meanwhile (EBUSY for
// everything else that wants it); other shards keep serving. A crash midway leaves a
// mark that makes the shard ECORRUPT until repair is run again, which finishes it.
async function repair (ctx, index) {
  const { shards } = ctx
  args.shardIndex(index, ctx.shardCount)
  const location = shards.locationOf(index)
  const lost = !fs.existsSync(location)
  if (lost && !shards.has(index)) throw errors.noShard(index)
  const before = shards.knownFiles(index)
  await shards.hold(index, 'is being repaired')
  try {
    await shards.usage.repairing(index)
    // Nothing is left to repair from a shard whose directory is gone: an empty shard
    // lets its keys be written again.
    if (lost) await createShard(location, shards.tmpDir)
    else await LevelDb.repair(location, index)
    const db = await LevelDb.open(location, { shard: index }).catch((err) => {
      throw errors.corrupt(`shard ${shardName(index)}`, `LevelDB's repair could not make it readable: ${err.message}`, { shard: index, cause: err })
    })
    let result
    try {
      const repaired = new Shard({ index, location, db, cap: shards.cap, chunkKeys: shards.chunkKeys, sync: true, account: { used: 0, files: 0 } })
      result = await rebuild(repaired, ctx.chunkSize)
    } finally {
      await db.close()
    }
    await shards.usage.repaired(index, { used: result.used, files: result.files, diskBytes: 0 })
    shards.markCleaned(index)
    // Files that left no trace at all can only be counted, from the last known total.
    const unaccounted = Math.max(0, (before ?? 0) - result.files - result.dropped.length)
    return { shard: index, ...result, unaccounted, recreated: lost }
  } finally {
    shards.unhold(index)
  }
}

// After LevelDB's repair: keeps the files whose every chunk is present and right,
// removes the others, pending writes, damage notes, and chunks and head records of no
// kept version, and rewrites the accounting. `shard` is a Shard over the repaired database. Idempotent:
// a repair cut short by a crash is finished by running it again.
async function rebuild (shard, chunkSize) {
  const { db } = shard
  const kept = new Map() // key -> the metadata of its version
  const dropped = []
  let used = 0
  const metas = []
  for await (const entry of db.scan({ ...records.metaRange(), valueAsBuffer: false })) {
    const key = entry.key.slice(records.META.length)
    try {
      metas.push(records.decodeMeta(entry.value, shard.index, key))
    } catch {
      await db.batch([{ type: 'del', key: entry.key }])
      dropped.push({ key, problem: 'its metadata record is unreadable' })
    }
  }
  for (const meta of metas) {
    const problem = await checkFile(shard, meta.key, chunkSize)
    if (problem) {
      await db.batch([{ type: 'del', key: records.metaKey(meta.key) }])
      dropped.push({ key: meta.key, problem })
    } else {
      kept.set(meta.key, meta)
      used += meta.size
    }
  }
  const notes = []
  for await (const entry of db.scan({ ...records.damageRange(), valueAsBuffer: false })) notes.push(records.decodeNote(entry.value))
  // Chunks of no kept version and pending records go, in a keys-only pass. Chunks of a
  // version neither kept nor pending belong to a file whose metadata was lost: its key
  // is all that is left to report.
  const pending = new Set()
  for await (const entry of db.scan({ ...records.pendingRange(), values: false })) pending.add(entry.key.slice(records.PENDING.length))
  const reported = new Set(dropped.map((d) => d.key))
  let ops = []
  for await (const entry of db.scan({ gt: records.DAMAGE, values: false })) {
    // Dead-version notes stay: the space they name is still to be reclaimed.
    if (entry.key.startsWith(records.META) || entry.key.startsWith(records.DEAD)) continue
    const system = entry.key.startsWith('!')
    const [key, version] = entry.key.split(' ')
    const meta = kept.get(key)
    // A head record's key is the file key alone; a file's data in its head has no chunk.
    const head = version === undefined
    const stray = system || !meta || (head ? meta.format === undefined : meta.version !== version || meta.inline)
    if (stray && !system && !meta && (head || !pending.has(version)) && !reported.has(key)) {
      reported.add(key)
      dropped.push({ key, problem: `its metadata was lost; ${head ? 'its head record was' : 'some of its chunks were'} found` })
    }
    if (stray) ops.push({ type: 'del', key: entry.key })
    if (ops.length >= 1000) {
      await db.batch(ops)
      ops = []
    }
  }
  ops.push({ type: 'put', key: records.ACCOUNT, value: JSON.stringify({ used, files: kept.size }) })
  await db.batch(ops, { sync: true })
  return { files: kept.size, used, dropped, notes }
}

module.exports = { repair }

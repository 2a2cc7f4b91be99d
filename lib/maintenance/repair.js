'use strict'

const fs = require('node:fs')
const { LevelDb } = require('../leveldb/leveldb')
const { Shard } = require('../shard/shard')
const { createShard } = require('../shard/create')
const { deadBytes } = require('../shard/dead-space')
const { shardName } = require('../base/shard-names')
const records = require('../shard/records')
const { encodeHead, decodeHead } = require('../shard/head-record')
const { payload, holds } = require('../shard/chunk-record')
const { contentHash, sha256Of } = require('../api/keys')
const { checkFile } = require('./file-check')
const args = require('../api/args')
const errors = require('../api/errors')

// Runs LevelDB's repair on one shard of an open store (`ctx`: { shards, chunkSize,
// shardCount }), keeps only the files that are whole and rebuilds the accounting. The
// shard is held exclusively (EBUSY for others); other shards keep serving. A crash
// midway leaves it ECORRUPT until repair is run again, which finishes it.
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
    // A shard whose directory is gone is made anew, so its keys can be written again.
    if (lost) await createShard(location, shards.tmpDir)
    else await LevelDb.repair(location, index)
    const db = await LevelDb.open(location, { shard: index }).catch((err) => {
      throw errors.corrupt(`shard ${shardName(index)}`, `LevelDB's repair could not make it readable: ${err.message}`, { shard: index, cause: err })
    })
    let result
    let dead // removed versions' bytes the repair left, for the usage cache
    try {
      const repaired = new Shard({ index, location, db, cap: shards.cap, chunkKeys: shards.chunkKeys, sync: true, account: { used: 0, files: 0 }, clock: shards.clock })
      result = await rebuild(repaired, ctx.chunkSize)
      dead = await deadBytes(db)
    } finally {
      await db.close()
    }
    await shards.usage.repaired(index, { used: result.used, files: result.files, diskBytes: 0, dead, nextExpiry: result.nextExpiry, trash: result.trash })
    shards.markCleaned(index)
    // Files that left no trace at all can only be counted, from the last known total.
    const unaccounted = Math.max(0, (before ?? 0) - result.files - result.dropped.length)
    delete result.nextExpiry // the usage cache's, not the report's
    delete result.trash
    return { shard: index, ...result, unaccounted, recreated: lost }
  } finally {
    shards.unhold(index)
  }
}

// Over the repaired database: keeps the files whose every chunk is present and right,
// removes the others, pending writes, damage notes, and chunks and heads of no kept
// version, and rewrites the accounting. A file that lost only its head record (format 3)
// or its metadata record is kept and the record remade from the other, if the version is
// whole (`remade`). records.HEADS goes with the other system records: the next open
// checks again; the expiry and trash indexes are made again from the kept files' metadata. Idempotent: a repair cut short is finished by running it again.
async function rebuild (shard, chunkSize) {
  const found = { kept: new Map(), used: 0, dropped: [], remade: [] } // kept: key -> meta
  const metas = await readMetas(shard, found)
  await checkFiles(shard, metas, chunkSize, found)
  const notes = []
  for await (const entry of shard.db.scan({ ...records.damageRange(), valueAsBuffer: false })) notes.push(records.decodeNote(entry.value))
  const ops = await removeStray(shard, chunkSize, found)
  // The expiry and trash indexes, which removeStray cleared with the other system records,
  // made again.
  const trash = records.noTrash(shard.restoredAt)
  for (const meta of found.kept.values()) {
    if (meta.expires !== undefined) ops.push({ type: 'put', key: records.expiryKey(meta.expires, meta.key), value: meta.version })
    if (meta.trashed !== undefined) ops.push({ type: 'put', key: records.trashKey(meta.trashed, meta.key), value: String(meta.size) })
    if (records.trashed(meta, trash.restoredAt)) {
      trash.files++
      trash.bytes += meta.size
      if (!(trash.first <= meta.trashed)) trash.first = meta.trashed
      if (!(trash.last >= meta.trashed)) trash.last = meta.trashed
    }
  }
  ops.push({ type: 'put', key: records.ACCOUNT, value: JSON.stringify({ used: found.used, files: found.kept.size }) })
  await shard.db.batch(ops, { sync: true })
  const expiries = [...found.kept.values()].map((meta) => meta.expires).filter((time) => time !== undefined)
  const nextExpiry = expiries.length ? Math.min(...expiries) : undefined
  return { files: found.kept.size, used: found.used, dropped: found.dropped, remade: found.remade, notes, nextExpiry, trash }
}

function keep (found, meta) {
  found.kept.set(meta.key, meta)
  found.used += meta.size
}

// Every metadata record that decodes; the others are removed, their files dropped.
async function readMetas (shard, found) {
  const metas = []
  for await (const entry of shard.db.scan({ ...records.metaRange(), valueAsBuffer: false })) {
    const key = entry.key.slice(records.META.length)
    try {
      metas.push(records.decodeMeta(entry.value, shard.index, key))
    } catch {
      await shard.db.batch([{ type: 'del', key: entry.key }])
      found.dropped.push({ key, problem: 'its metadata record is unreadable' })
    }
  }
  return metas
}

async function checkFiles (shard, metas, chunkSize, found) {
  for (const meta of metas) {
    const problem = await checkFile(shard, meta.key, chunkSize)
    if (!problem) keep(found, meta)
    else if (await wholeByChunks(shard, meta, chunkSize)) {
      // The head was lost or damaged, but the version the metadata names is whole.
      await shard.db.batch([{ type: 'put', key: meta.key, value: encodeHead(meta.key, meta) }])
      found.remade.push({ key: meta.key, problem: `${problem}: its head record was made again from its metadata record` })
      keep(found, meta)
    } else {
      await shard.db.batch([{ type: 'del', key: records.metaKey(meta.key) }])
      found.dropped.push({ key: meta.key, problem })
    }
  }
}

// Removes chunks of no kept version and pending records, keys only; resolves to the
// removals still to write. Chunks of a version neither kept nor pending belong to a file
// whose metadata was lost: its key is all that is left to report.
async function removeStray (shard, chunkSize, found) {
  const { db } = shard
  const { kept, dropped } = found
  const pending = new Set()
  for await (const entry of db.scan({ ...records.pendingRange(), values: false })) pending.add(entry.key.slice(records.PENDING.length))
  const reported = new Set(dropped.map((d) => d.key))
  let ops = []
  for await (const entry of db.scan({ gt: records.DAMAGE, values: false })) {
    // Dead-version notes stay: the space they name is still to be reclaimed.
    if (entry.key.startsWith(records.META) || entry.key.startsWith(records.DEAD)) continue
    const system = entry.key.startsWith('!')
    const [key, version] = entry.key.split(' ')
    // A head record's key is the file key alone; a file's data in its head has no chunk.
    const head = version === undefined
    if (head && !system && !kept.has(key) && !reported.has(key)) await remakeMeta(shard, key, chunkSize, found)
    const meta = kept.get(key)
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
  return ops
}

// A head whose metadata record was lost makes it again, if its version is whole.
async function remakeMeta (shard, key, chunkSize, found) {
  const meta = await fromHead(shard, key, chunkSize)
  if (!meta) return
  await shard.db.batch([{ type: 'put', key: records.metaKey(key), value: records.encodeMeta(meta) }])
  found.remade.push({ key, problem: 'its metadata record was lost: it was made again from its head record (a name the file had is lost)' })
  keep(found, meta)
}

// Whether meta's version (format 3, not inline) is whole by its chunks: each there, of its
// length and CRC32, and the content matching its SHA-256.
async function wholeByChunks (shard, meta, chunkSize) {
  if (meta.format === undefined || meta.inline || meta.chunks !== Math.ceil(meta.size / chunkSize)) return false
  const hash = contentHash()
  for (let i = 0; i < meta.chunks; i++) {
    const key = shard.chunkKeys.key(meta.key, meta.version, i)
    const value = await shard.db.get(key)
    const length = i === meta.chunks - 1 ? meta.size - i * chunkSize : chunkSize
    if (!holds(key, value, length)) return false
    hash.update(payload(value))
  }
  return hash.digest('hex') === meta.sha256
}

// The metadata the head at `key` holds, if the head is sound and its version whole.
async function fromHead (shard, key, chunkSize) {
  let version
  try {
    version = decodeHead(key, await shard.db.get(key))
  } catch {
    return undefined
  }
  const { meta, data } = version
  if (data ? sha256Of(data) !== meta.sha256 : !(await wholeByChunks(shard, meta, chunkSize))) return undefined
  return meta
}

module.exports = { repair }

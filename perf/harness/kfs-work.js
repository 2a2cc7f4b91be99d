'use strict'

// kfs's own work, as the perf scripts that compare kfs with raw LevelDB need it: the
// records kfs writes for a file and how it sends them, for a raw engine to write the
// same; kfs's options for a shard's LevelDB and raw LevelDBs laid out as kfs's shards;
// keys for distinct shards; and a kfs store whose shards all exist.

const fs = require('node:fs')
const path = require('node:path')
const crypto = require('node:crypto')
const records = require('../../lib/shard/records')
const chunkRecord = require('../../lib/shard/chunk-record')
const { encodeHead } = require('../../lib/shard/head-record')
const { shardFor } = require('../../lib/shard/routing')
const { Memtables } = require('../../lib/shard/memtables')
const { DEFAULTS: STORE } = require('../../lib/api/options')
const { BATCH_BYTES, MAX_IN_FLIGHT } = require('../../lib/data/chunk-writer')

const ROOT = path.join(__dirname, '..', '..') // this checkout

// The reference ID of the stores the perf scripts make, so that they can pick keys for a
// shard.
const REF = '00112233445566778899aabbccddeeff00112233'

const call = (fn) => new Promise((resolve, reject) => fn((err, value) => (err ? reject(err) : resolve(value))))
const randomKey = () => crypto.randomBytes(32).toString('hex')
const chunkKeys = () => new records.ChunkKeys(STORE.maxTableSize / STORE.shardCount, STORE.chunkSize)

// Keys that route to distinct shards of a store with reference ID REF.
function keysForShards (count) {
  const ref = Buffer.from(REF, 'hex')
  const seen = new Map()
  for (let i = 0; seen.size < count; i++) {
    const k = crypto.createHash('sha256').update(`key ${i}`).digest('hex')
    if (!seen.has(shardFor(ref, k))) seen.set(shardFor(ref, k), k)
  }
  return [...seen.values()].map((k) => ({ key: k }))
}

// kfs's options for a shard's LevelDB. A memory budget over these databases is
// rawShards' `memory`.
function shardOptions () {
  return { ...require('../../lib/leveldb/leveldb').DEFAULTS }
}

// The records kfs writes for `data` under `key`: its batches of chunk records, then the
// commit batch, with its head record (holding the data of a file of one chunk).
// `account`: the shard's accounting before the file, updated. Chunks are held until
// their records reach BATCH_BYTES, then sent `perBatch` to a batch (1, as
// lib/data/batch-sender.js sends them when the store does not sync); a file whose whole
// chunks never reach it goes into the commit batch, with no pending record.
function fileRecords (key, data, account, { keys = chunkKeys(), perBatch = 1 } = {}) {
  const version = records.newVersion()
  const chunks = Math.ceil(data.length / STORE.chunkSize)
  const meta = records.newMeta({ key, version, size: data.length, chunks, sha256: crypto.hash('sha256', data) })
  const puts = []
  for (let i = 0; i < chunks; i++) {
    const piece = data.subarray(i * STORE.chunkSize, (i + 1) * STORE.chunkSize)
    const record = chunkRecord.newRecord(piece.length, true)
    chunkRecord.copyIn(record, 0, piece)
    const chunkKey = keys.key(key, version, i)
    puts.push({ type: 'put', key: chunkKey, value: chunkRecord.seal(chunkKey, record) })
  }
  const held = Math.ceil(BATCH_BYTES / chunkRecord.recordLength(STORE.chunkSize))
  const whole = Math.floor(data.length / STORE.chunkSize) < held // in the commit batch
  // A file of one chunk written whole has its data in its head, and no chunk record.
  meta.inline = whole && chunks <= 1
  const commit = [
    { type: 'put', key, value: encodeHead(key, meta, meta.inline ? data : undefined) },
    { type: 'put', key: records.metaKey(key), value: records.encodeMeta(meta) },
    { type: 'put', key: records.ACCOUNT, value: JSON.stringify({ used: account.used + data.length, files: account.files + 1 }) }
  ]
  account.used += data.length
  account.files++
  if (meta.inline) return { batches: [], commit }
  if (whole) return { batches: [], commit: [...puts, ...commit] }
  const batches = []
  for (let i = 0; i < puts.length; i += perBatch) batches.push(puts.slice(i, i + perBatch))
  batches[0].unshift({ type: 'put', key: records.pendingKey(version), value: key })
  commit.splice(2, 0, { type: 'del', key: records.pendingKey(version) })
  return { batches, commit }
}

// Writes fileRecords() into a raw leveldown `db` as ChunkWriter sends them: the first
// batch alone, then at most `inFlight` outstanding, then the commit batch. `budget`
// (rawShards' route gives it): each batch waits for its room first, as kfs's do.
async function writeRecords (db, { batches, commit }, inFlight = MAX_IN_FLIGHT, budget = unbounded(db)) {
  const pending = []
  for (const [i, ops] of batches.entries()) {
    await budget.room()
    const written = budget.batch(ops)
    if (i === 0) await written
    else pending.push(written)
    while (pending.length >= inFlight) await pending.shift()
  }
  await Promise.all(pending)
  await budget.room()
  await budget.batch(commit)
}

// The batches into a raw database with no memory budget: { room(), batch(ops) }.
const unbounded = (db) => ({ room: () => undefined, batch: (ops) => call((cb) => db.batch(ops, cb)) })

// The batches into raw database `db` under `memtables` (kfs's own memory budget,
// shard/memtables.js), as a kfs shard sends them: { room(), batch(ops) }, room()
// what a batch waits for first (Shard#room), each batch counted once written. Memtables
// takes the database as a shard it can measure and flush.
function budgeted (db, memtables) {
  const shard = {
    db: {
      failed: undefined,
      memoryUsage: () => Number(db.getProperty('leveldb.approximate-memory-usage')) || 0,
      flush: () => call((cb) => db.compactRange('\x00', '\x00', cb)) // as LevelDb#flush
    },
    compacting: 0
  }
  memtables.add(shard)
  return {
    room: () => memtables.wait(),
    batch (ops) {
      memtables.begin(shard)
      const written = call((cb) => db.batch(ops, cb))
      written.then(() => memtables.wrote(shard, true), () => memtables.wrote(shard, false))
      return written
    }
  }
}

// A leveldown database at `dir`, made if missing.
function openRaw (dir, options) {
  const db = require('leveldown')(dir)
  return call((cb) => db.open({ createIfMissing: true, ...options }, cb)).then(() => db)
}

// How many keys a raw leveldown `db` holds, read with a keys-only iterator.
async function countKeys (db) {
  const it = db.iterator({ values: false, keyAsBuffer: false })
  let count = 0
  while (await call((cb) => it.next(cb)) !== undefined) count++
  await call((cb) => it.end(cb))
  return count
}

// `shards` raw LevelDBs in `dir` (kfs's shard options, or `options`), as kfs's shards
// are, all made now or (lazy) each when open(i) first asks for it. route(key, data):
// the index of the database kfs's routing sends the key to, that database if made, its
// `budget` (writeRecords'), and the records kfs would write there (fileRecords,
// `perBatch` chunks a batch); without `data`, no records. accounts[i]: database i's
// accounting record, as kfs's shard would hold it after the files routed there.
// `memory`: the databases' memtables are held to it as a kfs store's are to its memory
// budget with no writer or reader holding any of it (shard/memtables.js): flushed to
// tables, the fullest first, and writes waiting while they are over it. Without it,
// nothing flushes them but LevelDB, each at its own write buffer's size.
async function rawShards (dir, shards, { lazy = false, perBatch = 1, options = shardOptions(), memory } = {}) {
  fs.mkdirSync(dir, { recursive: true })
  const dbs = new Array(shards).fill(null)
  const budgets = new Array(shards).fill(null)
  const memtables = memory && new Memtables({ limit: memory })
  const open = async (i) => {
    if (dbs[i]) return dbs[i]
    dbs[i] = await openRaw(path.join(dir, String(i).padStart(3, '0')), options)
    budgets[i] = memtables ? budgeted(dbs[i], memtables) : unbounded(dbs[i])
    return dbs[i]
  }
  if (!lazy) for (let i = 0; i < shards; i++) await open(i)
  const accounts = dbs.map(() => ({ used: 0, files: 0 }))
  const ref = Buffer.from(REF, 'hex')
  const keys = chunkKeys()
  const route = (key, data) => {
    const shard = shardFor(ref, key) % shards
    return { shard, db: dbs[shard], budget: budgets[shard], file: data && fileRecords(key, data, accounts[shard], { keys, perBatch }) }
  }
  const close = () => Promise.all(dbs.filter(Boolean).map((db) => call((cb) => db.close(cb))))
  return { dbs, accounts, open, route, close, memtables }
}

// A kfs store (of the checkout at `lib`) with reference ID REF whose first `shards`
// shards (all but for a quick run) exist, are open, and were committed into once before
// any clock starts: a shard's first commit in a process makes its key fingerprints, a
// scan of its keys. A new tiny file into each (one written again would leave a dead
// version instead). `options`: the store's others.
async function openStore (dir, shards = STORE.shardCount, lib = ROOT, options = {}) {
  const store = require(lib)(dir, { ...options, referenceId: REF })
  const ref = Buffer.from(REF, 'hex')
  const wanted = new Set(keysForShards(shards).map(({ key }) => shardFor(ref, key)))
  while (wanted.size > 0) {
    const key = randomKey()
    if (wanted.delete(shardFor(ref, key))) await store.writeFile(key, 'warm-up')
  }
  return store
}

module.exports = { call, randomKey, chunkKeys, keysForShards, shardOptions, fileRecords, writeRecords, openRaw, countKeys, rawShards, openStore, REF }

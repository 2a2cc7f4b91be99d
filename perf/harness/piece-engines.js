'use strict'

// What the piece benchmarks (perf/pieces.js, perf/grow.js) share: the engines a piece
// goes into, the pieces themselves, and the memory sampler that watches an engine's
// process.
//
// Pieces: piece i's ID is the SHA-256 of a run's random seed and i, in hex (a random
// 32-byte piece ID, as a storage node addresses pieces); its bytes are a slice of a
// random pool at an offset drawn from the same hash, so that no copy is made and
// nothing per piece is held: a million pieces cost the measured process no memory.
//
// Engines: put(key, data), get(key) -> Buffer, del(key), list() -> how many pieces it
// holds (each engine's own way of listing them all), close(). Each may be opened again
// on its directory after close(). One raw LevelDB and the raw binding doing kfs's work
// do not give the space of removed pieces back to the disk by themselves (KEEPS_SPACE).
//
// kfs-expire is kfs whose pieces are put with an expiry TTL_MS after their upload, as
// Storj's benchmark gives them, and are collected by the store itself: expireAll() moves
// the process's clock (Date.now, which the store reads) past every piece's expiry, as
// Storj's benchmark collects at a time ahead; the store's timer, set for the real hour,
// is woken by one more file put with an expiry in the past, and expireAll() resolves
// once the store has collected them all (metrics().expiries.files).

const fs = require('node:fs')
const path = require('node:path')
const crypto = require('node:crypto')
const { PerformanceObserver, constants: { NODE_PERFORMANCE_GC_MAJOR } } = require('node:perf_hooks')
const { fsWrite, MiB } = require('./script')
const { memory, descriptors } = require('./usage')
const { call, chunkKeys, countKeys, openRaw, openStore, rawShards, writeRecords } = require('./kfs-work')
const { MEMORY } = require('../../lib/api/memory')
const records = require('../../lib/shard/records')
const chunkRecord = require('../../lib/shard/chunk-record')
const { decodeHead } = require('../../lib/shard/head-record')
const { DEFAULTS: STORE } = require('../../lib/api/options')

// A piece is a slice of a random pool at an offset up to this.
const POOL_SLACK = 4 * MiB
const KEEPS_SPACE = ['leveldb', 'raw-kfs']
// kfs-expire: a piece's expiry after its upload, Storj's benchmark's default TTL.
const TTL_MS = 60 * 60 * 1000
// kfs-expire: how often expireAll() asks the store how many files it collected.
const COLLECTED_POLL_MS = 10
const SAMPLE_MS = 20
const FDS_EVERY = 25 // memory samples per descriptor count

// Pieces of `size` bytes: key(i), content(i).
function pieceSet (size) {
  const pool = crypto.randomBytes(size + POOL_SLACK)
  const seed = crypto.randomBytes(16)
  const hash = (i) => crypto.createHash('sha256').update(seed).update(String(i)).digest()
  return {
    key: (i) => hash(i).toString('hex'),
    content (i) {
      const at = hash(i).readUInt32LE(0) % (POOL_SLACK + 1)
      return pool.subarray(at, at + size)
    }
  }
}

// An engine (above) at `dir`. fresh: a kfs store opened with no shard made yet.
// budget: kfs's memory budget, if not its default.
async function openEngine (engine, dir, fresh, budget) {
  if (engine === 'kfs-expire') return openExpiring(dir, fresh, budget)
  if (engine === 'kfs' || engine === 'kfs-operator' || engine === 'kfs-sync') {
    const store = await openKfs(dir, fresh, { sync: engine === 'kfs-sync', memory: budget })
    return {
      put: (k, data) => store.writeFile(k, data),
      get: (k) => store.readFile(k),
      del: (k) => store.unlink(k),
      async list () {
        let n = 0
        for await (const entry of store.list()) if (entry) n++
        return n
      },
      close: () => store.close()
    }
  }
  if (engine === 'raw-kfs') return openRawKfs(dir, budget ?? MEMORY)
  if (engine === 'leveldb') {
    const db = await openRaw(dir, require('../../lib/leveldb/leveldb').DEFAULTS)
    return {
      put: (k, data) => call((cb) => db.put(k, data, cb)),
      get: (k) => call((cb) => db.get(k, { asBuffer: true }, cb)),
      del: (k) => call((cb) => db.del(k, cb)),
      list: () => countKeys(db),
      close: () => call((cb) => db.close(cb))
    }
  }
  return openFiles(dir, engine === 'files-fsync')
}

async function openKfs (dir, fresh, options) {
  const store = fresh ? require('../..')(dir, options) : await openStore(dir, undefined, undefined, options)
  await store.open()
  return store
}

// kfs-expire (above). The clock is moved before the store is made: its collector reads
// the clock it was given then.
async function openExpiring (dir, fresh, memory) {
  const realNow = Date.now
  let ahead = 0
  Date.now = () => realNow() + ahead
  const store = await openKfs(dir, fresh, { memory })
  let puts = 0
  return {
    put: (k, data) => store.writeFile(k, data, { expires: Date.now() + TTL_MS }).then(() => { puts++ }),
    get: (k) => store.readFile(k),
    async expireAll () {
      ahead += TTL_MS + 1
      await store.writeFile('expiry-wake', 'wake', { expires: 1 })
      while ((await store.metrics()).expiries.files < puts + 1) await new Promise((resolve) => setTimeout(resolve, COLLECTED_POLL_MS))
    },
    close: () => store.close()
  }
}

// One file per piece, Storj's old piece store: written to a temporary file, then renamed
// to DIR/ab/cdef... (256 directories, made when missing); fsynced before its rename when
// `fsync`. Listed by reading the 256 directories.
function openFiles (dir, fsync) {
  const temp = path.join(dir, 'temp')
  const subdirs = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, '0'))
  fs.mkdirSync(temp, { recursive: true })
  for (const sub of subdirs) fs.mkdirSync(path.join(dir, sub), { recursive: true })
  const where = (k) => path.join(dir, k.slice(0, 2), k.slice(2))
  let written = 0
  return {
    async put (k, data) {
      const partial = path.join(temp, `blob-${written++}.partial`)
      await fsWrite(partial, data, fsync)
      await fs.promises.rename(partial, where(k))
    },
    get: (k) => fs.promises.readFile(where(k)),
    del: (k) => fs.promises.unlink(where(k)),
    async list () {
      let n = 0
      for (const sub of subdirs) n += (await fs.promises.readdir(path.join(dir, sub))).length
      return n
    },
    close: async () => {}
  }
}

// The raw binding doing kfs's work (raw-kfs above), an engine as openEngine's, its
// memtables held to kfs's memory budget `memory` as kfs's are.
async function openRawKfs (dir, memory) {
  const raw = await rawShards(dir, STORE.shardCount, { memory })
  const keys = chunkKeys()
  const read = { asBuffer: true, fillCache: false } // as lib/leveldb/leveldb.js reads
  const get = (db, key) => call((cb) => db.get(key, read, cb))
  const metaOf = async (k) => {
    const { shard, db } = raw.route(k)
    return { shard, db, meta: records.decodeMeta(await get(db, records.metaKey(k)), shard, k) }
  }
  const headOf = async (k) => {
    const { shard, db } = raw.route(k)
    return { shard, db, ...decodeHead(k, await get(db, k)) }
  }
  const chunk = async (db, k, version, i) => {
    const chunkKey = keys.key(k, version, i)
    const record = await get(db, chunkKey)
    if (!chunkRecord.intact(chunkKey, record)) throw new Error(`raw-kfs: chunk ${chunkKey} fails its CRC32`)
    return chunkRecord.payload(record)
  }
  return {
    put (k, data) {
      const { db, file, budget } = raw.route(k, data)
      return writeRecords(db, file, undefined, budget)
    },
    async get (k) {
      const { db, meta, data } = await headOf(k)
      if (data) return data
      const chunks = await Promise.all(Array.from({ length: meta.chunks }, (_, i) => chunk(db, k, meta.version, i)))
      return chunks.length === 1 ? chunks[0] : Buffer.concat(chunks)
    },
    async del (k) {
      const { shard, meta } = await metaOf(k)
      const { budget } = raw.route(k)
      const account = raw.accounts[shard]
      account.used -= meta.size
      account.files--
      const ops = [{ type: 'del', key: records.metaKey(k) }, { type: 'del', key: k }]
      if (!meta.inline) for (let i = 0; i < meta.chunks; i++) ops.push({ type: 'del', key: keys.key(k, meta.version, i) })
      if (meta.size > 0) ops.push({ type: 'put', key: records.deadKey(k, meta.version), value: String(meta.size) })
      ops.push({ type: 'put', key: records.ACCOUNT, value: JSON.stringify(account) })
      await budget.room()
      await budget.batch(ops)
    },
    close: () => raw.close()
  }
}

// Peak memory (RSS, and private: RssAnon), sampled every SAMPLE_MS from start() to
// stop(), and open descriptors, every FDS_EVERY samples and at both ends. On the main
// thread: a read of /proc/self/status costs tens of microseconds whatever the process
// maps, and listing a thousand descriptors 0.5 ms every 500 ms (/proc/self/smaps, which
// takes 60-90 ms with 256 shards' tables mapped, is not read).
function sampler () {
  let peak
  let samples
  const sample = (fds) => {
    const m = memory()
    peak.rss = Math.max(peak.rss, m.anon + m.file)
    peak.anon = Math.max(peak.anon, m.anon)
    if (fds || ++samples % FDS_EVERY === 0) peak.fds = Math.max(peak.fds, descriptors() || 0)
  }
  let timer
  return {
    start () {
      peak = { rss: 0, anon: 0, fds: 0 }
      samples = 0
      sample(true)
      timer = setInterval(sample, SAMPLE_MS)
    },
    stop () {
      clearInterval(timer)
      sample(true)
      return peak
    }
  }
}

// The process's garbage collections from start() to stop(): { full: how many were full
// (mark-compacts), ms: the time all of them took }.
function gcCounter () {
  let counts
  const count = (entries) => {
    for (const entry of entries) {
      if (entry.detail.kind === NODE_PERFORMANCE_GC_MAJOR) counts.full++
      counts.ms += entry.duration
    }
  }
  const observer = new PerformanceObserver((list) => count(list.getEntries()))
  return {
    start () {
      counts = { full: 0, ms: 0 }
      observer.observe({ entryTypes: ['gc'] })
    },
    stop () {
      count(observer.takeRecords())
      observer.disconnect()
      return counts
    }
  }
}

function shuffled (n) {
  const order = Array.from({ length: n }, (_, i) => i)
  for (let i = n - 1; i > 0; i--) {
    const j = crypto.randomInt(i + 1)
    ;[order[i], order[j]] = [order[j], order[i]]
  }
  return order
}

module.exports = { KEEPS_SPACE, pieceSet, openEngine, sampler, gcCounter, shuffled }

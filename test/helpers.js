'use strict'

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const crypto = require('node:crypto')
const { spawn, spawnSync } = require('node:child_process')
const { expect } = require('chai')
const kfs = require('..')
const { decodeHead, HEAD_FIELDS } = require('../lib/shard/head-record')
const { seal } = require('../lib/shard/chunk-record')
const { ChunkKeys } = require('../lib/shard/records')

// KFS_TEST_SLOWDOWN, a factor (default 1), scales every time bound of the tests: mocha's
// timeout (the configs in test/ and .mocharc.js), each this.timeout(), the waits of
// within() and of polling loops, the bounds on elapsed time, and the sleeps that wait
// for something to have happened. On a slow or busy machine, KFS_TEST_SLOWDOWN=3 npm test.
// The defaults already leave room for a loaded 2-core machine. A bound that proves the
// library did not wait for one of its own delays (5 s for a holder that does not share)
// cannot grow past that delay, and is left alone.
const SLOWDOWN = (() => {
  const given = process.env.KFS_TEST_SLOWDOWN
  const factor = given === undefined || given === '' ? 1 : Number(given)
  if (!(factor > 0 && Number.isFinite(factor))) throw new Error(`KFS_TEST_SLOWDOWN must be a positive number, not ${JSON.stringify(given)}`)
  return factor
})()

// `ms` scaled by KFS_TEST_SLOWDOWN.
const scaled = (ms) => Math.ceil(ms * SLOWDOWN)

// Resolves after `ms` scaled by KFS_TEST_SLOWDOWN: for a sleep that waits for something
// to have happened.
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, scaled(ms)))

// Resolves as `promise` does, or rejects once `ms` (scaled) passed first, naming `what`.
function within (promise, ms, what = 'it') {
  let timer
  const late = new Promise((resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not settle within ${scaled(ms)} ms`)), scaled(ms))
  })
  return Promise.race([promise, late]).finally(() => clearTimeout(timer))
}

// Unmounts `dir` if it is mounted: tries umount a few times while it is busy (a child
// process may still be closing its files), then detaches it lazily (umount -l: gone from
// the tree at once, released once nothing uses it). For after()/afterEach()/finally blocks, so a test
// that failed leaves no mount behind. Returns whether `dir` is no longer a mount point.
function unmount (dir) {
  for (let attempt = 0; attempt < 5; attempt++) {
    if (!isMountPoint(dir)) return true
    const r = spawnSync('umount', [dir], { encoding: 'utf8' })
    if (r.status === 0) return true
    spawnSync('sleep', ['0.2'])
  }
  spawnSync('umount', ['-l', dir])
  return !isMountPoint(dir)
}

function isMountPoint (dir) {
  const resolved = path.resolve(dir)
  const mounts = fs.readFileSync('/proc/self/mounts', 'utf8').split('\n')
  // /proc/self/mounts writes a space in a path as \040.
  return mounts.some((line) => (line.split(' ')[1] || '').replace(/\\040/g, ' ') === resolved)
}

// A fresh directory per test, removed afterwards, with every store opened through
// `open` closed before removal.
function useTmp () {
  const ctx = { dir: undefined, stores: [] }
  beforeEach(async () => {
    ctx.dir = await fs.promises.mkdtemp(path.join(os.tmpdir(), 'kfs-'))
  })
  afterEach(async () => {
    await Promise.allSettled(ctx.stores.splice(0).map((s) => s.close()))
    await fs.promises.rm(ctx.dir, { recursive: true, force: true })
  })
  ctx.open = (options, sub = 'store') => {
    const store = kfs(path.join(ctx.dir, sub), options)
    ctx.stores.push(store)
    return store
  }
  return ctx
}

// Asserts that `promise` rejects (or `fn` throws) with err.code === code; returns the error.
async function rejects (promise, code) {
  let error
  try {
    await (typeof promise === 'function' ? promise() : promise)
  } catch (err) {
    error = err
  }
  expect(error, `expected a rejection with ${code}`).to.be.an('error')
  expect(error.code, error.stack).to.equal(code)
  return error
}

function throws (fn, code) {
  let error
  try {
    fn()
  } catch (err) {
    error = err
  }
  expect(error, `expected a throw with ${code}`).to.be.an('error')
  expect(error.code, error.message).to.equal(code)
  return error
}

// Deterministic pseudo-random bytes: reproducible failures, no flaky statistics.
function bytes (size, seed = 'seed') {
  const out = Buffer.allocUnsafe(size)
  let counter = 0
  for (let offset = 0; offset < size; offset += 32) {
    crypto.createHash('sha256').update(`${seed}:${counter++}`).digest().copy(out, offset)
  }
  return out
}

function sha256 (data) {
  return crypto.createHash('sha256').update(data).digest('hex')
}

// Shards this process holds open, seen from the outside: LevelDB keeps each open
// database's LOCK file open.
function openShardLocks (dir) {
  const fdDir = '/proc/self/fd'
  let count = 0
  for (const fd of fs.readdirSync(fdDir)) {
    try {
      const target = fs.readlinkSync(path.join(fdDir, fd))
      if (target.startsWith(dir) && /\d{3}\.s\/LOCK$/.test(target)) count++
    } catch {
      // the descriptor closed while we looked
    }
  }
  return count
}

// Keys that route to distinct shards of a store with the given reference ID.
function keysForShards (referenceId, count) {
  const { shardFor } = require('../lib/shard/routing')
  const ref = Buffer.from(referenceId, 'hex')
  const seen = new Map()
  for (let i = 0; seen.size < count; i++) {
    const key = sha256(`key ${i}`)
    const shard = shardFor(ref, key)
    if (!seen.has(shard)) seen.set(shard, key)
  }
  return [...seen.entries()].map(([shard, key]) => ({ shard, key }))
}

// A key that routes to the given shard.
function keyInShard (referenceId, shard, salt = '') {
  const { shardFor } = require('../lib/shard/routing')
  const ref = Buffer.from(referenceId, 'hex')
  for (let i = 0; ; i++) {
    const key = sha256(`${salt} ${i}`)
    if (shardFor(ref, key) === shard) return key
  }
}

async function collect (iterable) {
  const out = []
  for await (const item of iterable) out.push(item)
  return out
}

const { LevelDb } = require('../lib/leveldb/leveldb')

// Opens every shard's LevelDB directly and checks that each chunk record belongs to a
// committed file version and that no pending records remain.
async function assertNoStrayChunks (base) {
  const stores = fs.readdirSync(base).map((d) => path.join(base, d))
  for (const store of stores) {
    for (const dir of fs.readdirSync(store).filter((d) => /^\d{3}\.s$/.test(d))) {
      const db = await LevelDb.open(path.join(store, dir))
      const it = db.iterator({ valueAsBuffer: false, keys: true, values: true })
      const versions = new Map()
      const chunks = []
      for (let e = await it.next(); e; e = await it.next()) {
        if (e.key.startsWith('!m!')) versions.set(e.key.slice(3), JSON.parse(e.value))
        else if (e.key.startsWith('!p!')) throw new Error(`pending record left in ${dir}: ${e.key}`)
        else if (!e.key.startsWith('!')) chunks.push(e.key)
      }
      await it.end()
      await db.close()
      for (const key of chunks) {
        const [file, version, index] = key.split(' ')
        const meta = versions.get(file)
        // A head record (no version in its key) is of a file with a head.
        if (version === undefined) expect(meta && meta.format === 3, `stray head ${key} in ${dir}`).to.equal(true)
        else expect(meta && meta.version === version && Number(index) < meta.chunks && !meta.inline, `stray chunk ${key} in ${dir}`).to.equal(true)
      }
    }
  }
}

// Overwrites chunk `index` of every file in every shard with other bytes of equal length
// (for a file whose head holds its data, chunk 0 is the data in its head).
async function damageChunk (base, index) {
  for (const store of fs.readdirSync(base).map((d) => path.join(base, d))) {
    for (const dir of fs.readdirSync(store).filter((d) => /^\d{3}\.s$/.test(d))) {
      const db = await LevelDb.open(path.join(store, dir))
      const it = db.iterator({ gt: '0', lt: 'g' })
      const ops = []
      for (let e = await it.next(); e; e = await it.next()) {
        const [, version, at] = e.key.split(' ')
        if (version === undefined && index === 0 && e.value.length > HEAD_FIELDS && e.value[5] & 1) {
          ops.push({ type: 'put', key: e.key, value: Buffer.concat([e.value.subarray(0, HEAD_FIELDS), Buffer.alloc(e.value.length - HEAD_FIELDS, 0x55)]) })
        } else if (Number(at) === index) ops.push({ type: 'put', key: e.key, value: Buffer.alloc(e.value.length, 0x55) })
      }
      await it.end()
      await db.batch(ops)
      await db.close()
    }
  }
}

// Rewrites a closed store as format 2 wrote it: no head records (a file's data in its
// head goes into its chunk record 0) and no shard marked as holding only files with
// one, metadata without `format` and `inline`, format.json at 2.
async function toFormat2 (storeDir) {
  const { shardCap, chunkSize } = JSON.parse(fs.readFileSync(path.join(storeDir, 'format.json'), 'utf8'))
  const chunkKeys = new ChunkKeys(shardCap, chunkSize)
  await rewriteShards(storeDir, (e, ops) => {
    if (e.key.startsWith('!m!')) {
      const meta = JSON.parse(e.value)
      delete meta.format
      delete meta.inline
      ops.push({ type: 'put', key: e.key, value: JSON.stringify(meta) })
    } else if (!e.key.startsWith('!') && !e.key.includes(' ')) {
      const { meta, data } = decodeHead(e.key, e.value)
      ops.push({ type: 'del', key: e.key })
      if (data && meta.chunks === 1) {
        const chunkKey = chunkKeys.key(e.key, meta.version, 0)
        ops.push({ type: 'put', key: chunkKey, value: seal(chunkKey, Buffer.concat([Buffer.alloc(4), data])) })
      }
    }
  }, ['!h'])
  setFormat(storeDir, 2)
}

// Rewrites a closed store as format 1 wrote it: bare chunk records, metadata without
// `chunkDigest`, format.json at 1. Format 1 files read, verify and hash as they did.
async function toFormat1 (storeDir) {
  await toFormat2(storeDir)
  await rewriteShards(storeDir, (e, ops) => {
    if (e.key.startsWith('!m!')) {
      const meta = JSON.parse(e.value)
      delete meta.chunkDigest
      ops.push({ type: 'put', key: e.key, value: JSON.stringify(meta) })
    } else if (!e.key.startsWith('!')) ops.push({ type: 'put', key: e.key, value: e.value.subarray(4) })
  })
  setFormat(storeDir, 1)
}

// rewrite(entry, ops) for every metadata record and every record of a file, in each of
// the closed store's shards; the ops it adds are written, after deletes of `remove`.
async function rewriteShards (storeDir, rewrite, remove = []) {
  for (const dir of fs.readdirSync(storeDir).filter((d) => /^\d{3}\.s$/.test(d))) {
    const db = await LevelDb.open(path.join(storeDir, dir))
    const it = db.iterator({ gt: '!m!', lt: 'g' })
    const ops = remove.map((key) => ({ type: 'del', key }))
    for (let e = await it.next(); e; e = await it.next()) rewrite(e, ops)
    await it.end()
    await db.batch(ops)
    await db.close()
  }
}

function setFormat (storeDir, format) {
  const file = path.join(storeDir, 'format.json')
  fs.writeFileSync(file, JSON.stringify({ ...JSON.parse(fs.readFileSync(file, 'utf8')), format }))
}

// Runs fn() with the digest thread terminated at the `nth` call (from 0) of Digester's
// `method`; resolves to how many calls there were.
async function killingDigestThread (method, nth, fn) {
  const { Digester } = require('../lib/data/digester')
  const real = Digester.prototype[method]
  let calls = 0
  Digester.prototype[method] = function (...args) {
    if (calls++ === nth) this.worker.terminate()
    return real.apply(this, args)
  }
  try {
    await fn()
  } finally {
    Digester.prototype[method] = real
  }
  return calls
}

// What an open store has in tmp/ but the shards it makes there (lib/shard/spares.js,
// create.js: spares, the template of a new shard, a shard being made ahead): spooled
// input, half-made shards left behind.
// Runs `script` in a Node process of its own from the package's root (require('./') is
// kfs), with `args` after it; resolves once it exited 0, else rejects with its stderr.
function runNode (script, args) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['-e', script, ...args], { cwd: path.join(__dirname, '..') })
    let stderr = ''
    child.stderr.on('data', (d) => (stderr += d))
    child.on('error', reject)
    child.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`child exited ${code}: ${stderr}`))))
  })
}

function tmpLeftovers (location) {
  return fs.readdirSync(path.join(location, 'tmp')).filter((name) => !/^(spare|template|\d{3}\.s)-/.test(name))
}

const REF = '00112233445566778899aabbccddeeff00112233'

module.exports = { SLOWDOWN, scaled, sleep, within, runNode, unmount, isMountPoint, tmpLeftovers, useTmp, rejects, throws, bytes, sha256, openShardLocks, keysForShards, keyInShard, collect, assertNoStrayChunks, damageChunk, toFormat1, toFormat2, killingDigestThread, REF }

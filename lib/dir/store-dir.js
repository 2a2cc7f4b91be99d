'use strict'

const fs = require('node:fs/promises')
const path = require('node:path')
const crypto = require('node:crypto')
const { syncDir } = require('../base/sync-dir')
const { openFailure } = require('../leveldb/classify')
const { lockHeld, lockHolder, REPLAY_UNKNOWN } = require('../leveldb/log-guard')
const { DiskReserve } = require('./disk-reserve')
const { ownersRefusal, mkdirWhy } = require('./owner')
const { FORMAT_VERSION, FORMAT_FILE, readFormat, writeFormat, checkOptions } = require('./format')
const errors = require('../api/errors')

// LevelDB and its binding, loaded once a state is opened or made: a store another
// process holds is found busy before (openState), and used without them (lib/share/).
const levelDb = () => require('../leveldb/leveldb').LevelDb

// The store directory: format.json (the persisted options, format.js), the `state`
// LevelDB (the store's lock and usage cache), tmp/, the disk reserve and the shards NNN.s.
const STATE_DB = 'state'
const TMP_DIR = 'tmp'
const SHARD_DIR = /^(\d{3})\.s$/

// A store another user owns fails with EACCES saying so (owner.js).
function openStoreDir (dir, given, resolved) {
  return openDir(dir, given, resolved).catch(async (err) => {
    const state = path.join(dir, STATE_DB)
    throw await ownersRefusal(err, [dir, state], [path.join(state, 'LOCK')], { readOnly: resolved.readOnly })
  })
}

// Opens (or, with `create`, creates) the store directory. Whatever can refuse the open (a
// foreign directory, a bad, newer or contradicting format.json) is decided before anything
// is written. The `state` LevelDB is then held open: its LOCK makes the store one
// process's (EBUSY).
async function openDir (dir, given, resolved) {
  const create = resolved.create && !resolved.readOnly
  const entries = await listDir(dir, create)
  if (entries.includes(FORMAT_FILE)) {
    const format = await readFormat(dir)
    checkOptions(given, format)
    if (resolved.readOnly) return openReadOnly(dir, format)
  } else {
    const shard = entries.find((e) => SHARD_DIR.test(e))
    if (shard) throw errors.corrupt(`the store at ${dir}`, `it has shards (${shard}) but no ${FORMAT_FILE}`, { path: dir })
    const foreign = entries.find((e) => e !== STATE_DB && e !== TMP_DIR && !e.startsWith(FORMAT_FILE + '.'))
    if (foreign) throw errors.notStore(dir, foreign)
    if (!create) throw errors.noStore(dir, entries.length ? `it holds no ${FORMAT_FILE}` : 'it is empty')
    await makeDirs(dir)
  }

  const tmpDir = path.join(dir, TMP_DIR)
  const reserve = new DiskReserve(dir, tmpDir, resolved.diskReserve)
  if (!entries.includes(STATE_DB)) await createState(dir, tmpDir)
  const state = await openState(dir, reserve).catch(async (err) => {
    // A state made in place by an earlier kfs, cut off by a crash in the store's creation:
    // what to do is named, nothing removed.
    if (err.code !== 'ECORRUPT' || await exists(path.join(dir, FORMAT_FILE))) throw err
    throw errors.corrupt(`the store state at ${path.join(dir, STATE_DB)}`, `${err.cause ? err.cause.message : err.message}; the store was never fully created (it has no ${FORMAT_FILE}), so it holds no files: if no other program uses ${dir}, remove its ${STATE_DB} directory and open it again`, { path: dir, cause: err })
  })
  try {
    return await prepare(dir, given, resolved, { tmpDir, reserve, state })
  } catch (err) {
    await state.close().catch(() => {})
    // The state opened, but the directory may still refuse writes (its mode).
    throw errors.NOT_WRITABLE.includes(err.code) && err.syscall ? errors.notWritable(`the store at ${dir} could not be opened`, err, { path: dir }) : err
  }
}

async function prepare (dir, given, resolved, { tmpDir, reserve, state }) {
  // Decided again under the state's lock: another process may have created the store
  // since, and its reference ID must never be replaced.
  if (!await exists(path.join(dir, FORMAT_FILE))) {
    await writeFormat(dir, {
      format: FORMAT_VERSION,
      referenceId: given.referenceId || crypto.randomBytes(20).toString('hex'),
      chunkSize: resolved.chunkSize,
      shardCap: Math.floor(resolved.maxTableSize / resolved.shardCount),
      shardCount: resolved.shardCount,
      created: new Date().toISOString()
    })
  }
  let format = await readFormat(dir)
  checkOptions(given, format)
  if (format.format < FORMAT_VERSION) {
    await writeFormat(dir, { ...format, format: FORMAT_VERSION, upgraded: new Date().toISOString() })
    format = await readFormat(dir)
  }
  // tmp/ holds what a process that died left, or a state another process is making
  // (createState), which then meets ours.
  await fs.rm(tmpDir, { recursive: true, force: true, maxRetries: 5 })
  await fs.mkdir(tmpDir, { recursive: true })
  await reserve.init()
  // Reopened after a failed write (UsageCache): whoever needed the write decides whether
  // to give up the reserve, never the reopen.
  return { format, state, tmpDir, shards: await listShards(dir), reserve, reopenState: () => openState(dir) }
}

// A store opened read-only writes nothing in its directory: state and shards open through
// shadows (lib/leveldb/read-only.js); tmp/ is left, the disk reserve is of size 0, and an
// older store stays at its format (its files' metadata says how to read them).
async function openReadOnly (dir, format) {
  const state = await openState(dir, undefined, true)
  const tmpDir = path.join(dir, TMP_DIR)
  try {
    return { format, state, tmpDir, shards: await listShards(dir), reserve: new DiskReserve(dir, tmpDir, 0), reopenState: () => openState(dir, undefined, true) }
  } catch (err) {
    await state.close().catch(() => {})
    throw err
  }
}

async function listShards (dir) {
  return new Set((await fs.readdir(dir)).map((e) => SHARD_DIR.exec(e)).filter(Boolean).map((m) => Number(m[1])))
}

const STATE_OPTIONS = { writeBufferSize: 64 * 1024, maxOpenFiles: 16 }

// A failure another open at the same moment may have caused (REPLAY_UNKNOWN): the state
// was left as it was, to be opened again.
const OPEN_AGAIN = Symbol('kfs.openAgain')

// Opening writes: on a full disk, `reserve` is given up. A state another process holds is
// EBUSY before LevelDB is asked: LevelDB starts a new LOG before it tries the lock, and a
// holder that is opening reads its LOG (log-guard.js).
function openState (dir, reserve, readOnly = false) {
  const open = async () => {
    if (!readOnly && (await lockHeld(path.join(dir, STATE_DB)))) stateFailure(dir, Object.assign(new Error(`${path.join(dir, STATE_DB)}/LOCK: already held by process`), { reason: 'locked' }))
    return levelDb().open(path.join(dir, STATE_DB), { ...STATE_OPTIONS, readOnly }).catch((err) => {
      try {
        stateFailure(dir, err)
      } catch (failure) {
        if (err[REPLAY_UNKNOWN]) failure[OPEN_AGAIN] = true
        throw failure
      }
    })
  }
  return reserve ? reserve.withRoom(open) : open()
}

// Made in tmp/ and renamed into place whole, as shards are: LevelDB 1.20 neither syncs a
// new database's first manifest nor the rename of CURRENT, so a power cut could leave a
// state naming an empty manifest, which no open accepts.
async function createState (dir, tmpDir) {
  const staging = path.join(tmpDir, `state-${crypto.randomBytes(4).toString('hex')}`)
  let placed = false
  try {
    await fs.mkdir(tmpDir, { recursive: true })
    await fs.mkdir(staging)
    const db = await levelDb().open(staging, { ...STATE_OPTIONS, createIfMissing: true, errorIfExists: true }).catch((err) => stateFailure(dir, err))
    await db.close()
    await syncDir(staging)
    await fs.rename(staging, path.join(dir, STATE_DB))
    placed = true
    await syncDir(dir)
  } catch (err) {
    if (!placed) {
      await fs.rm(staging, { recursive: true, force: true }).catch(() => {})
      // Another process made one meanwhile: the open that follows meets theirs.
      if (await exists(path.join(dir, STATE_DB))) return
    }
    if (!err.syscall) throw err // from LevelDB, classified
    throw (errors.NOT_WRITABLE.includes(err.code) ? errors.notWritable : errors.system)(`the store at ${dir} could not be created`, err, { path: dir })
  }
}

function exists (file) {
  return fs.access(file).then(() => true, () => false)
}

function stateFailure (dir, err) {
  throw openFailure(err, { dir, what: `the store at ${dir}`, damaged: `the store state at ${path.join(dir, STATE_DB)}`, props: { path: dir } })
}

// fs.mkdir(dir, { recursive: true }), then each directory made synced into its parent:
// a store whose name a power cut takes is lost whole. A `dir` that existed (a process
// that died before syncing it, or the user's, in a parent perhaps unreadable) is synced
// if it can be. A failure says which directory and why.
async function makeDirs (dir) {
  const first = await fs.mkdir(dir, { recursive: true }).catch((err) => {
    const made = err.path || dir
    throw errors.notCreated(dir, made, mkdirWhy(made, err), err)
  })
  if (first === undefined) return syncDir(path.dirname(path.resolve(dir))).catch(() => {})
  for (let made = path.resolve(dir); path.dirname(made) !== made; made = path.dirname(made)) {
    await syncDir(path.dirname(made))
    if (made === path.resolve(first)) break
  }
}

// ENOENT (or ENOTDIR) unless `dir` holds a store, which it only reads.
async function checkStore (dir) {
  const entries = await listDir(dir, false)
  if (!entries.includes(FORMAT_FILE)) throw errors.noStore(dir, entries.length ? `it holds no ${FORMAT_FILE}` : 'it is empty')
}

async function listDir (dir, create) {
  let stat
  try {
    stat = await fs.stat(dir)
  } catch (err) {
    if (err.code === 'ENOTDIR') throw errors.notDirectory(dir, { within: true, cause: err })
    if (err.code !== 'ENOENT') throw err
    if (!create) throw errors.noStore(dir, 'it does not exist')
    return []
  }
  if (!stat.isDirectory()) throw errors.notDirectory(dir)
  return fs.readdir(dir)
}

// EBUSY naming the process holding the store; `shared`: this open would have used a
// holder; `why`: why it could not reach it (errors.busy).
async function busy (dir, cause, { shared = false, why } = {}) {
  const pid = await lockHolder(path.join(dir, STATE_DB))
  if (pid === undefined) return cause
  return errors.busy(dir, cause.cause || cause, { pid, shared, why })
}

module.exports = { openStoreDir, checkStore, busy, OPEN_AGAIN }

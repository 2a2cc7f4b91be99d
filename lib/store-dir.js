'use strict'

const fs = require('node:fs/promises')
const path = require('node:path')
const crypto = require('node:crypto')
const { LevelDb, next, end } = require('./leveldb')
const { FORMAT_VERSION } = require('./format')
const { SHARD_COUNT } = require('./routing')
const errors = require('./errors')

const FORMAT_FILE = 'format.json'
const STATE_DB = 'state'
const TMP_DIR = 'tmp'
const SHARD_DIR = /^(\d{3})\.s$/

const shardDirName = (index) => `${errors.shardName(index)}.s`

// Opens (or on first use creates) the store directory. The `state` LevelDB is held open
// for the store's lifetime: its LOCK makes the whole store single-process (EBUSY), and
// it caches each shard's accounting so usage() need not open every shard.
async function openStoreDir (dir, given, resolved) {
  const entries = await listDir(dir)
  if (!entries.includes(FORMAT_FILE)) {
    const shard = entries.find((e) => SHARD_DIR.test(e))
    if (shard) throw errors.corrupt(`the store at ${dir}`, `it has shards (${shard}) but no ${FORMAT_FILE}`, { path: dir })
    const foreign = entries.find((e) => e !== STATE_DB && e !== TMP_DIR && !e.startsWith(FORMAT_FILE + '.'))
    if (foreign) throw errors.notStore(dir, foreign)
  }

  let state
  try {
    state = await LevelDb.open(path.join(dir, STATE_DB), { createIfMissing: true, writeBufferSize: 64 * 1024, maxOpenFiles: 16 })
  } catch (err) {
    if (err.reason === 'locked') throw errors.busy(dir, err)
    if (err.reason === 'system') throw errors.system(`the store at ${dir} could not be opened`, err, { path: dir })
    throw errors.corrupt(`the store state at ${path.join(dir, STATE_DB)}`, err.message, { path: dir, cause: err })
  }
  try {
    // Decided, created and read under the lock, not from the listing above: another
    // process may have created the store since, and its ID must never be replaced.
    const formatExists = await fs.access(path.join(dir, FORMAT_FILE)).then(() => true, () => false)
    if (!formatExists) {
      await writeFormat(dir, {
        format: FORMAT_VERSION,
        referenceId: given.referenceId || crypto.randomBytes(20).toString('hex'),
        chunkSize: resolved.chunkSize,
        shardCap: Math.floor(resolved.maxTableSize / resolved.shardCount),
        shardCount: resolved.shardCount,
        created: new Date().toISOString()
      })
    }
    const fmt = await readFormat(dir)
    checkOption('referenceId', given.referenceId, fmt.referenceId)
    checkOption('shardCount', given.shardCount, fmt.shardCount)
    checkOption('maxTableSize', given.maxTableSize && Math.floor(given.maxTableSize / fmt.shardCount), fmt.shardCap, ' per shard')
    checkOption('chunkSize', given.chunkSize, fmt.chunkSize)
    const tmpDir = path.join(dir, TMP_DIR)
    // Whatever is in tmp/ was left by a process that died: spooled input, half-made shards.
    await fs.rm(tmpDir, { recursive: true, force: true })
    await fs.mkdir(tmpDir)
    const shards = new Set((await fs.readdir(dir)).map((e) => SHARD_DIR.exec(e)).filter(Boolean).map((m) => Number(m[1])))
    return { format: fmt, state, tmpDir, shards }
  } catch (err) {
    await state.close()
    throw err
  }
}

async function listDir (dir) {
  let stat
  try {
    stat = await fs.stat(dir)
  } catch (err) {
    if (err.code !== 'ENOENT') throw err
    await fs.mkdir(dir, { recursive: true })
    return []
  }
  if (!stat.isDirectory()) throw errors.notDirectory(dir)
  return fs.readdir(dir)
}

function checkOption (name, given, stored, unit = '') {
  if (given !== undefined && given !== stored) {
    throw errors.invalidValue(`options.${name}`, `gives ${given}${unit} but the store was created with ${stored}${unit}`)
  }
}

async function writeFormat (dir, fmt) {
  const file = path.join(dir, FORMAT_FILE)
  const tmp = `${file}.${crypto.randomBytes(4).toString('hex')}`
  const handle = await fs.open(tmp, 'wx')
  try {
    await handle.writeFile(JSON.stringify(fmt, null, 2) + '\n')
    await handle.sync()
  } finally {
    await handle.close()
  }
  await fs.rename(tmp, file)
  await syncDir(dir)
}

async function readFormat (dir) {
  const file = path.join(dir, FORMAT_FILE)
  let fmt
  try {
    fmt = JSON.parse(await fs.readFile(file, 'utf8'))
  } catch (err) {
    throw errors.corrupt(`the format file ${file}`, err.message, { path: dir, cause: err })
  }
  const valid = fmt && fmt.format === FORMAT_VERSION && /^[0-9a-f]{40}$/.test(fmt.referenceId) &&
    Number.isSafeInteger(fmt.chunkSize) && fmt.chunkSize > 0 && Number.isSafeInteger(fmt.shardCap) && fmt.shardCap > 0 &&
    Number.isInteger(fmt.shardCount) && fmt.shardCount >= 1 && fmt.shardCount <= SHARD_COUNT && (fmt.shardCount & (fmt.shardCount - 1)) === 0
  if (!valid) throw errors.corrupt(`the format file ${file}`, 'it is not a kfs format 1 record', { path: dir })
  return fmt
}

async function syncDir (dir) {
  const handle = await fs.open(dir, 'r')
  try {
    await handle.sync()
  } finally {
    await handle.close()
  }
}

// Usage cache: per shard { used, files, diskBytes, open }. A shard is marked open while
// this process may change it; a record still marked open at startup means the last
// process died with the shard open, so its cached figures cannot be trusted.
const USAGE = 'usage!'
const usageKey = (index) => USAGE + errors.shardName(index)

// Returns the trusted records and every shard ever opened: a shard the state knows but
// whose directory is gone was lost, and must be reported, not created afresh.
async function readUsageCache (state) {
  const cache = new Map()
  const known = new Set()
  const it = state.iterator({ gt: USAGE, lt: USAGE + '\xff', valueAsBuffer: false })
  try {
    for (let entry = await next(it); entry; entry = await next(it)) {
      const index = Number(entry.key.slice(USAGE.length))
      const record = JSON.parse(entry.value)
      known.add(index)
      if (!record.open) cache.set(index, record)
    }
  } finally {
    await end(it)
  }
  return { cache, known }
}

function writeUsageCache (state, index, record) {
  return state.put(usageKey(index), JSON.stringify(record))
}

module.exports = { openStoreDir, readUsageCache, writeUsageCache, shardDirName }

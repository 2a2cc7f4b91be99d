'use strict'

// Opening a database through the binding: the one read-write open per process, the
// shadow a read-only open goes through, the log guard, and what a power cut left.
const fs = require('node:fs/promises')
const path = require('node:path')
const leveldown = require('leveldown')
const { guardedOpen } = require('./log-guard')
const { recoverCut } = require('./power-cut')
const { makeShadow, blockCompactions, isShadowed } = require('./read-only')
const { classifyOpenError } = require('./classify')

const FULL = new Set(['ENOSPC', 'EDQUOT'])

// Databases open for writing in this process, by real path. A second open must never
// reach LevelDB: it closes the descriptor of an fcntl lock this process holds, which drops
// the lock (POSIX) while the first open goes on.
const HELD = new Set()

// Each leveldown instance makes its own `supports`, the same for all and read by no one:
// 400 KB of heap for 256 shards. Shared, as the heap's size decides how often V8 collects
// it whole (doc/performance.md, "Format 3: a piece is one get").
const MANIFEST = { supports: undefined }

// LevelDB's default: larger bought no write speed, smaller cost some (doc/performance.md).
const WRITE_BUFFER = 4 * 1024 * 1024

// For 128 KiB values (perf/probes/throughput.js). The block cache stays empty: reads pass
// fillCache: false, and LevelDB never caches the blocks of a table it maps.
const DEFAULTS = {
  compression: false, // stored files are mostly compressed or encrypted already
  writeBufferSize: WRITE_BUFFER,
  maxFileSize: 32 * 1024 * 1024, // a full 32 GiB shard is a thousand tables, not tens of thousands
  cacheSize: 4 * 1024 * 1024,
  maxOpenFiles: 64
}

// Resolves to { binding, dir (where LevelDB has it open), shadow, held, writeBuffer,
// replayed (it had log records to replay) }, or rejects with a `reason`: 'missing',
// 'locked', 'system' (with its code) or 'damaged'. readOnly: through a shadow
// (read-only.js), never created; its failures carry `readOnly`.
async function openDatabase (location, { readOnly = false, ...options } = {}) {
  if (!readOnly) return openHeld(location, options)
  let shadow, opened
  try {
    shadow = await makeShadow(location)
    opened = await openAt(location, shadow.dir, { ...options, createIfMissing: false, errorIfExists: false }, shadow)
    await blockCompactions(shadow.dir)
    return opened
  } catch (err) {
    if (opened) await closeBinding(opened.binding).catch(() => {})
    if (shadow) await shadow.remove().catch(() => {})
    // Only the shadow is written: a full disk is the temporary directory's.
    if (shadow && FULL.has(err.code)) err.message += ` (the temporary directory ${shadow.tmp}, where a database opened read-only is shadowed, is full)`
    throw Object.assign(err, { readOnly: true })
  }
}

async function openHeld (location, options) {
  if (isShadowed(location)) throw Object.assign(new Error(`${location}: open read-only in this process`), { reason: 'locked' })
  const held = await fs.realpath(location).catch(() => path.resolve(location))
  if (HELD.has(held)) throw Object.assign(new Error(`${location}/LOCK: already held by this process`), { reason: 'locked' })
  HELD.add(held)
  try {
    return { ...(await openAt(location, location, options)), held }
  } catch (err) {
    HELD.delete(held)
    throw err
  }
}

function release (held) {
  HELD.delete(held)
}

// `dir`: `location` or its shadow.
async function openAt (location, dir, { createIfMissing = false, errorIfExists = false, ...options }, shadow) {
  const tuning = Object.fromEntries(Object.entries(options).filter(([, value]) => value !== undefined))
  // LevelDB would make the directory, LOCK and LOG before finding no database there.
  if (!createIfMissing) {
    try {
      await fs.access(path.join(dir, 'CURRENT'))
    } catch (err) {
      throw Object.assign(new Error(`${location}: no LevelDB database here (${err.code})`), { reason: 'missing', cause: err })
    }
  }
  const open = () => guarded(dir, { ...DEFAULTS, ...tuning, createIfMissing, errorIfExists })
  let opened
  try {
    opened = await open()
  } catch (err) {
    // Never in a shadow: its files are the store's own.
    if (shadow || err.reason !== 'damaged' || !(await recoverCut(dir).catch(() => false))) throw err
    opened = await open()
  }
  return { ...opened, dir, shadow, writeBuffer: tuning.writeBufferSize || WRITE_BUFFER }
}

// In a shadow, the log guard links and renames the symbolic links, never at `location`.
async function guarded (dir, options) {
  const binding = leveldown(dir)
  binding.supports = MANIFEST.supports ??= binding.supports
  const replayed = await guardedOpen(dir, {
    open: () => new Promise((resolve, reject) => {
      binding.open(options, (err) => (err ? reject(classifyOpenError(err)) : resolve()))
    }),
    close: () => closeBinding(binding),
    classify: (status) => classifyOpenError(new Error(status))
  })
  return { binding, replayed }
}

const closeBinding = (binding) => new Promise((resolve) => binding.close(() => resolve()))

module.exports = { openDatabase, release, DEFAULTS, WRITE_BUFFER }

'use strict'

// LevelDB 1.20 without paranoid_checks (leveldown cannot set it) skips a write-ahead log
// it cannot open while opening (out of descriptors: EMFILE), says so only in its info
// LOG ("Ignoring error ..."), then writes a manifest past that log and deletes it: the
// writes that were only in it are lost, silently. A log holds writes at open only after
// a crash or a close without flush, so the guard usually costs a listing and a stat.
// Otherwise it keeps a hard link to each such log, under a name LevelDB ignores, until
// LOG shows that LevelDB replayed them all; if it skipped one, the links become logs
// again, numbered to be replayed at the next open, and this open fails with the cause.
const fs = require('node:fs/promises')
const path = require('node:path')
const { syncDir } = require('../base/sync-dir')
const { parseManifest } = require('./manifest')
const { lockListed, lockOwners, OVERLAYFS_MAGIC } = require('./proc-locks')

const LOG_FILE = /^(\d+)\.log$/
const KEPT_FILE = /^kfs-kept-(\d+)\.log$/ // not a name LevelDB's ParseFileName accepts
const NUMBERED = /^(?:(\d+)\.(?:log|ldb|sst|dbtmp)|MANIFEST-(\d+))$/
const pad = (n) => String(n).padStart(6, '0')
const logName = (n) => `${pad(n)}.log`
const keptName = (n) => `kfs-kept-${pad(n)}.log`
const numbers = (names, pattern) => names.map((name) => pattern.exec(name)).filter(Boolean).map((m) => Number(m[1] ?? m[2]))
const ascending = (list) => [...list].sort((a, b) => a - b)

// One guarded open or repair at a time per directory in this process: another's links
// would look like the leftovers of a crash, and be restored under its feet.
const busy = new Map()

function serialized (dir, fn) {
  const key = path.resolve(dir)
  const run = (busy.get(key) || Promise.resolve()).then(fn)
  const tail = run.then(() => {}, () => {})
  busy.set(key, tail)
  tail.then(() => busy.get(key) === tail && busy.delete(key))
  return run
}

// Opens the database at `dir` through binding.open() (which rejects with a classified
// error) under the guard, and resolves to whether it had a log with records to replay
// (false: LevelDB read no log, so it dropped nothing). Rejects with what open()
// rejected with, or with an error carrying `reason` ('system' with an fs-style `code`,
// or what binding.classify(text) makes of a LevelDB status). binding.close() closes
// what open() opened.
function guardedOpen (dir, binding) {
  return serialized(dir, () => guard(dir, binding).catch((err) => {
    throw err.reason ? err : Object.assign(new Error(`${dir}: ${err.message}`), { reason: 'system', code: err.code || 'EIO', cause: err })
  }))
}

async function guard (dir, { open, close, classify }) {
  let names = await list(dir)
  const leftovers = names ? numbers(names, KEPT_FILE) : []
  // No log holds a byte (a new database, or one whose logs hold nothing): nothing to
  // replay, so nothing LevelDB could drop.
  if (!names || (leftovers.length === 0 && !(await someNonEmpty(dir, numbers(names, LOG_FILE))))) {
    await open()
    return false
  }
  const replayed = () => open().then(() => true)
  // No database yet, though logs hold records: one made there (createIfMissing) replays
  // every log it finds.
  if (!names.includes('CURRENT')) return replayed()
  // Another process has it open: LevelDB will refuse us, and its files are not ours to move.
  if (await lockHeld(dir)) return replayed()
  const manifest = await readManifest(dir)
  if (leftovers.length > 0) {
    // Links a crash left (it interrupted a guarded open): their logs may be gone.
    // Replaying them all again, in order, after whatever the database holds is
    // harmless, as nothing was written since: no write gets through while links exist.
    await restore(dir, leftovers, manifest ? Math.max(manifest.logNumber, manifest.nextFile - 1) : 0)
    names = await list(dir)
  }
  if (!manifest) return replayed() // LevelDB reports what is wrong with it
  const live = []
  for (const n of numbers(names, LOG_FILE)) {
    if ((n >= manifest.logNumber || n === manifest.prevLogNumber) && (await size(path.join(dir, logName(n)))) > 0) live.push(n)
  }
  if (live.length === 0) return replayed()

  const kept = await keep(dir, ascending(live))
  if (kept.length === 0) return replayed() // the logs went meanwhile: someone else opened it
  // A LOG that LevelDB could neither rename nor recreate would be an older open's.
  const before = await fs.stat(path.join(dir, 'LOG')).catch(() => undefined)
  try {
    await open()
  } catch (err) {
    // A failed open deletes no log: the links are mere copies.
    for (const n of kept) await fs.unlink(path.join(dir, keptName(n))).catch(() => {})
    await syncDir(dir).catch(() => {})
    throw err
  }
  const failure = await skipped(dir, kept, before, classify).catch((err) => err)
  if (!failure) {
    try {
      // Oldest first, each removal durable before the next: links a crash leaves are
      // then the newest logs, and replaying those again on top is harmless.
      for (const n of kept) {
        await unlinkIfThere(path.join(dir, keptName(n)))
        await syncDir(dir)
      }
    } catch (err) {
      // Nothing has been written: a link left behind is replayed again, harmlessly.
      await close()
      throw err
    }
    return true
  }
  // Restored while the database is still open, so its LOCK keeps other processes out.
  // Should this fail, the next open restores what is left over.
  await restore(dir, kept).catch(() => {})
  await close()
  throw failure
}

// Turns kept links back into logs LevelDB replays at the next open, numbered past every
// file (and `floor`) in their original order: a log replayed after a newer one would
// shadow its records (level-0 tables are searched newest number first). Renamed, not
// linked and unlinked, and each rename durable before the next: a crash must never
// leave an older log to be replayed after a newer one.
async function restore (dir, kept, floor = 0) {
  let next = Math.max(floor, ...numbers(await fs.readdir(dir), NUMBERED)) + 1
  for (const n of ascending(kept)) {
    try {
      await fs.rename(path.join(dir, keptName(n)), path.join(dir, logName(next++)))
    } catch (err) {
      // Another process is restoring them at the same moment: the first rename of each
      // link wins, the other process stops at its first miss, and the logs still end
      // numbered in their order (each process numbers past the files it listed).
      if (err.code === 'ENOENT') throw Object.assign(new Error(`${dir}: another process is opening this database`), { reason: 'locked', cause: err })
      throw err
    }
    await syncDir(dir)
  }
}

// Before RepairDB, which turns every log into a table: the links an interrupted open
// left become logs again.
function settleForRepair (dir) {
  return serialized(dir, async () => {
    const names = await list(dir)
    const leftovers = names ? numbers(names, KEPT_FILE) : []
    if (leftovers.length > 0 && !(await lockHeld(dir))) await restore(dir, leftovers)
  })
}

async function keep (dir, logs) {
  const kept = []
  try {
    for (const n of logs) {
      try {
        await fs.link(path.join(dir, logName(n)), path.join(dir, keptName(n)))
        kept.push(n)
      } catch (err) {
        if (err.code === 'ENOENT') continue // replayed and deleted meanwhile: by its holder, who keeps us out
        if (err.code === 'EEXIST') throw Object.assign(new Error(`${dir}: another process is opening this database`), { reason: 'locked', cause: err })
        throw err
      }
    }
    await syncDir(dir) // the links must outlive a power loss that LevelDB's deletion does
  } catch (err) {
    for (const n of kept) await fs.unlink(path.join(dir, keptName(n))).catch(() => {})
    throw err
  }
  return kept
}

// On an open's failure: LevelDB's LOG did not show every kept log replayed, and they
// are kept for the next open. Another process's attempt to open the database at the
// same moment replaces the LOG too (LevelDB 1.20 starts a new one before it tries the
// lock), so an open that may meet others (a store's state, when its holder died) may
// try again.
const REPLAY_UNKNOWN = Symbol('kfs.replayUnknown')

// Undefined when LevelDB's LOG shows that it replayed every kept log, otherwise the
// error to fail the open with.
async function skipped (dir, kept, before, classify) {
  let text
  try {
    const handle = await fs.open(path.join(dir, 'LOG'))
    try {
      const stat = await handle.stat()
      if (!before || stat.ino !== before.ino) text = await handle.readFile('latin1')
    } finally {
      await handle.close()
    }
  } catch (err) {
    if (err.code !== 'ENOENT') throw err
  }
  // LevelDB runs without an info log when it cannot create one, which in practice means
  // no descriptor was free (it renamed the old one to LOG.old first). EMFILE lets the
  // shard pool retry once another shard has closed.
  if (text === undefined) {
    return Object.assign(new Error(`${dir}: LevelDB opened without its info log (no file descriptor free to create LOG, most likely), so whether it replayed every log is unknown; the logs are kept for the next open`), { reason: 'system', code: 'EMFILE', [REPLAY_UNKNOWN]: true })
  }
  const ignored = /Ignoring error (.*)/.exec(text)
  if (ignored) return classify(`${dir}: LevelDB skipped a log instead of replaying it (${ignored[1]}); the logs are kept for the next open`)
  const replayed = new Set([...text.matchAll(/Recovering log #(\d+)$/gm)].map((m) => Number(m[1])))
  const missed = kept.find((n) => !replayed.has(n))
  if (missed !== undefined) {
    return Object.assign(new Error(`${dir}: LevelDB's LOG does not show log #${missed} replayed; the logs are kept for the next open`), { reason: 'system', code: 'EIO', [REPLAY_UNKNOWN]: true })
  }
  return undefined
}

// The log numbers from which LevelDB replays: { logNumber, prevLogNumber, nextFile }, or
// undefined when there is no database or its manifest cannot be read as LevelDB would.
async function readManifest (dir) {
  try {
    const current = await fs.readFile(path.join(dir, 'CURRENT'), 'latin1')
    if (!/^MANIFEST-\d+\n$/.test(current)) return undefined
    return parseManifest(await fs.readFile(path.join(dir, current.slice(0, -1))))
  } catch (err) {
    if (err.code === 'ENOENT') return undefined
    throw err
  }
}

// Whether a process holds the database's LOCK (LevelDB takes a POSIX lock on it), as
// /proc/locks says (proc-locks.js). False where that cannot be read. `recent`: from a
// read of /proc/locks at most RECENT_MS old, for callers that ask about many databases
// in turn and read what a holder could change under them anyway (a lock taken right
// after any check) as a reader that gives up on what it meets (files.js).
async function lockHeld (dir, { recent = false } = {}) {
  const locks = await readLocks(dir, recent)
  return locks ? lockListed(locks.table, locks.stat, locks.overlay) : false
}

const RECENT_MS = 100
let recentLocks // { at, table (a promise) }

function locksTable (recent) {
  if (!recent) return fs.readFile('/proc/locks', 'latin1')
  if (!recentLocks || Date.now() - recentLocks.at > RECENT_MS) recentLocks = { at: Date.now(), table: fs.readFile('/proc/locks', 'latin1') }
  return recentLocks.table
}

// The ID of the process holding the LOCK of the database at `dir`, or undefined when
// /proc/locks does not say.
async function lockHolder (dir) {
  const locks = await readLocks(dir)
  return locks ? lockOwners(locks.table, locks.stat, locks.overlay)[0] : undefined
}

// /proc/locks and what proc-locks.js needs to find the LOCK of the database at `dir`
// in it, or undefined where either cannot be read.
async function readLocks (dir, recent = false) {
  const file = path.join(dir, 'LOCK')
  try {
    const stat = await fs.stat(file, { bigint: true })
    return { stat, overlay: await isOverlay(file, stat.dev), table: await locksTable(recent) }
  } catch {
    return undefined
  }
}

// Whether `file`, on the device `dev`, is on an overlay: asked of each device once.
const overlays = new Map() // dev -> promise of whether it is an overlay
function isOverlay (file, dev) {
  if (!overlays.has(dev)) {
    const overlay = fs.statfs(file).then((s) => s.type === OVERLAYFS_MAGIC)
    overlay.catch(() => overlays.delete(dev))
    overlays.set(dev, overlay)
  }
  return overlays.get(dev)
}

async function someNonEmpty (dir, logs) {
  for (const n of logs) if ((await size(path.join(dir, logName(n)))) > 0) return true
  return false
}

async function size (file) {
  try {
    return (await fs.stat(file)).size
  } catch (err) {
    if (err.code === 'ENOENT') return 0
    throw err
  }
}

async function list (dir) {
  try {
    return await fs.readdir(dir)
  } catch (err) {
    if (err.code === 'ENOENT' || err.code === 'ENOTDIR') return undefined // LevelDB's to report or create
    throw err
  }
}

async function unlinkIfThere (file) {
  await fs.unlink(file).catch((err) => {
    if (err.code !== 'ENOENT') throw err
  })
}

module.exports = { REPLAY_UNKNOWN, guardedOpen, settleForRepair, readManifest, logName, keptName, lockHeld, lockHolder }

'use strict'

// LevelDB 1.20 without paranoid_checks (leveldown cannot set it) skips a log it cannot
// open at open (EMFILE), says so only in LOG ("Ignoring error ..."), then writes a
// manifest past that log and deletes it: the writes only in it are lost, silently. So
// while an open replays logs, a hard link to each is kept under a name LevelDB ignores,
// until LOG shows all replayed; if one was skipped, the links become logs again, numbered
// to be replayed at the next open, and this open fails. Without logs to replay (no crash,
// no close without flush) the guard costs a listing and a stat.
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

// One guarded open or repair per directory at a time: another's links would look like a
// crash's leftovers.
const busy = new Map()

function serialized (dir, fn) {
  const key = path.resolve(dir)
  const run = (busy.get(key) || Promise.resolve()).then(fn)
  const tail = run.then(() => {}, () => {})
  busy.set(key, tail)
  tail.then(() => busy.get(key) === tail && busy.delete(key))
  return run
}

// Opens `dir` through binding.open() under the guard; resolves to whether a log had
// records to replay. Rejects with what open() did, or with a `reason` ('system' with a
// `code`, or binding.classify(LevelDB status)). binding.close() closes what open() opened.
function guardedOpen (dir, binding) {
  return serialized(dir, () => guard(dir, binding).catch((err) => {
    throw err.reason ? err : Object.assign(new Error(`${dir}: ${err.message}`), { reason: 'system', code: err.code || 'EIO', cause: err })
  }))
}

async function guard (dir, { open, close, classify }) {
  const logs = await logsToGuard(dir)
  if (logs === NOTHING_TO_REPLAY) {
    await open()
    return false
  }
  const kept = logs.length > 0 ? await keep(dir, ascending(logs)) : []
  if (kept.length === 0) return open().then(() => true)
  // A LOG LevelDB could neither rename nor recreate is an older open's.
  const before = await fs.stat(path.join(dir, 'LOG')).catch(() => undefined)
  try {
    await open()
  } catch (err) {
    // A failed open deletes no log.
    for (const n of kept) await fs.unlink(path.join(dir, keptName(n))).catch(() => {})
    await syncDir(dir).catch(() => {})
    throw err
  }
  const failure = await skipped(dir, kept, before, classify).catch((err) => err)
  if (!failure) return dropKept(dir, kept, close).then(() => true)
  // Restored while open, so its LOCK keeps others out; the next open restores the rest.
  await restore(dir, kept).catch(() => {})
  await close()
  throw failure
}

const NOTHING_TO_REPLAY = Symbol('nothing to replay')

// The logs LevelDB will replay that the guard keeps, or NOTHING_TO_REPLAY.
async function logsToGuard (dir) {
  let names = await list(dir)
  const leftovers = names ? numbers(names, KEPT_FILE) : []
  if (!names || (leftovers.length === 0 && !(await someNonEmpty(dir, numbers(names, LOG_FILE))))) return NOTHING_TO_REPLAY
  // No database yet: one made there (createIfMissing) replays every log it finds.
  if (!names.includes('CURRENT')) return []
  // Another process has it open: LevelDB will refuse us.
  if (await lockHeld(dir)) return []
  const manifest = await readManifest(dir)
  if (leftovers.length > 0) {
    // Links an interrupted open left. No write gets through while links exist, so
    // replaying them again, in order, after whatever the database holds is harmless.
    await restore(dir, leftovers, manifest ? Math.max(manifest.logNumber, manifest.nextFile - 1) : 0)
    names = await list(dir)
  }
  if (!manifest) return [] // LevelDB reports what is wrong with it
  const live = []
  for (const n of numbers(names, LOG_FILE)) {
    if ((n >= manifest.logNumber || n === manifest.prevLogNumber) && (await size(path.join(dir, logName(n)))) > 0) live.push(n)
  }
  return live
}

// Removed oldest first, each removal durable before the next: links a crash leaves are
// the newest logs, harmless to replay again.
async function dropKept (dir, kept, close) {
  try {
    for (const n of kept) {
      await unlinkIfThere(path.join(dir, keptName(n)))
      await syncDir(dir)
    }
  } catch (err) {
    await close() // nothing written yet: a link left behind is replayed again, harmlessly
    throw err
  }
}

// Turns kept links back into logs for the next open, numbered past every file (and
// `floor`) in their order: a log replayed after a newer one would shadow its records
// (level-0 tables are searched newest number first). Renamed, each rename durable before
// the next, so that a crash never leaves an older log to be replayed after a newer one.
async function restore (dir, kept, floor = 0) {
  let next = Math.max(floor, ...numbers(await fs.readdir(dir), NUMBERED)) + 1
  for (const n of ascending(kept)) {
    try {
      await fs.rename(path.join(dir, keptName(n)), path.join(dir, logName(next++)))
    } catch (err) {
      // Another process restoring them at once: the first rename of each link wins, the
      // other stops at its first miss, and the logs still end numbered in their order.
      if (err.code === 'ENOENT') throw Object.assign(new Error(`${dir}: another process is opening this database`), { reason: 'locked', cause: err })
      throw err
    }
    await syncDir(dir)
  }
}

// Before RepairDB (which turns every log into a table), links left become logs again.
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
        if (err.code === 'ENOENT') continue // replayed and deleted meanwhile by its holder
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

// On an open's failure: LOG did not show every kept log replayed. Another process's
// open at the same moment replaces LOG too (LevelDB starts one before it tries the lock),
// so an open that may meet others (a store's state, its holder dead) may try again.
const REPLAY_UNKNOWN = Symbol('kfs.replayUnknown')

// Undefined when LOG shows every kept log replayed, else the error to fail the open with.
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
  // LevelDB runs without LOG when it cannot create one: in practice no descriptor was
  // free. EMFILE lets the shard pool retry once another shard has closed.
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

// { logNumber, prevLogNumber, nextFile }, or undefined when there is no database or
// LevelDB would not read its manifest.
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

// Whether a process holds the database's LOCK (a POSIX lock), as /proc/locks says; false
// where that cannot be read. `recent`: a read of /proc/locks up to RECENT_MS old, for
// callers asking about many databases that give up on whatever they meet (files.js). That
// read may list a lock released since, on an inode a new LOCK file now has: a "held" from
// it is read again.
async function lockHeld (dir, { recent = false } = {}) {
  const locks = await readLocks(dir, recent)
  if (!locks || !lockListed(locks.table, locks.stat, locks.overlay)) return false
  return recent ? lockHeld(dir) : true
}

const RECENT_MS = 100
let recentLocks // { at, table (a promise) }

function locksTable (recent) {
  if (!recent) return fs.readFile('/proc/locks', 'latin1')
  if (!recentLocks || Date.now() - recentLocks.at > RECENT_MS) recentLocks = { at: Date.now(), table: fs.readFile('/proc/locks', 'latin1') }
  return recentLocks.table
}

// The ID of the process holding the database's LOCK, or undefined.
async function lockHolder (dir) {
  const locks = await readLocks(dir)
  return locks ? lockOwners(locks.table, locks.stat, locks.overlay)[0] : undefined
}

// What proc-locks.js needs to find the database's LOCK in /proc/locks, or undefined.
async function readLocks (dir, recent = false) {
  const file = path.join(dir, 'LOCK')
  try {
    const stat = await fs.stat(file, { bigint: true })
    return { stat, overlay: await isOverlay(file, stat.dev), table: await locksTable(recent) }
  } catch {
    return undefined
  }
}

const overlays = new Map() // dev -> promise of whether it is an overlay, asked once
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

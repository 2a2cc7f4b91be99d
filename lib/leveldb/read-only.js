'use strict'

// LevelDB 1.20 cannot open a database without writing to it: every open takes LOCK
// (opened read-write), starts a new info LOG, writes a new MANIFEST and CURRENT, turns
// the logs it replays into tables and deletes the files these replace. A database that
// must not change (on a read-only mount, a backup or snapshot, a copy without write
// permission) is opened through a shadow instead: a directory under os.tmpdir() of
// symbolic links to the database's files. Whatever LevelDB writes lands in the shadow;
// whatever it deletes (the old manifest, replayed logs, obsolete tables) is a link; it
// reads tables and logs through the links.
//
// It must never open a linked file for writing, which would write through the link.
// Without reuse_logs (leveldown never sets it) LevelDB writes only new files: tables,
// logs, the manifest and CURRENT's temporary file (NNNNNN.dbtmp, renamed over the
// CURRENT link), all numbered from the manifest's next file number on (db_impl.cc,
// version_set.cc). A crash can leave files with such numbers (a table of a compaction
// not yet recorded, the manifest or .dbtmp of an open cut short): LevelDB would reuse
// their names, so they are not linked. Logs are linked whatever their number: LevelDB
// replays those past the manifest and numbers its new files past them. LOCK, LOG and
// LOG.old are not linked either: LevelDB makes its own in the shadow.
//
// A shadow is named for its process: kfs-readonly-PID-START-NS-BOOT-XXXXXX, START the
// process's start time, so that a pid used again is told apart, NS its pid namespace,
// whose pids are the only ones it can check (a container sharing the directory has
// others), and BOOT the first 8 hex digits of the kernel's boot id, which tells hosts
// (a temporary directory on NFS) and boots apart: the host's pid namespace has the same
// number on every machine. Each is 0 without /proc. close() removes it, and so does
// the process's exit; a process killed (by any signal a library must not handle) leaves
// it, and the next process of the same namespace and boot to make a shadow in the same
// directory removes those whose process is gone, before making its own.
const fs = require('node:fs/promises')
const { rmSync } = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { readManifest, lockHeld } = require('./log-guard')

const OWN = new Set(['LOCK', 'LOG', 'LOG.old'])
const NUMBERED = /^(?:(\d+)\.(?:ldb|sst|dbtmp)|MANIFEST-(\d+))$/

// Databases with a shadow open in this process, by location -> count: a read-write
// open of one would change its files under the shadow.
const shadowed = new Map()
const roots = new Set() // the shadows' directories, for removeShadowsSync()
let exitHooked = false

const failure = (reason, message, props) => Object.assign(new Error(message), { reason, ...props })

// Makes the shadow of the database at `location`. Resolves to { dir, tmp (the temporary
// directory it is in), remove() }, or rejects with an error carrying a `reason` as
// LevelDb.open's do: 'missing', 'locked' (a process holds the database, and would change
// its files under the shadow), 'damaged' (its manifest cannot be read) or 'system'.
async function makeShadow (location) {
  location = path.resolve(location)
  let names
  try {
    names = await fs.readdir(location)
  } catch (err) {
    if (err.code !== 'ENOENT' && err.code !== 'ENOTDIR') throw failure('system', `${location}: ${err.message}`, { code: err.code, cause: err })
    names = []
  }
  if (!names.includes('CURRENT')) throw failure('missing', `${location}: no LevelDB database here`)
  if (await lockHeld(location)) throw failure('locked', `${location}/LOCK: already held by process`)
  let manifest
  try {
    manifest = await readManifest(location)
  } catch (err) {
    throw failure('system', `${location}: ${err.message}`, { code: err.code, cause: err })
  }
  if (!manifest) throw failure('damaged', `${location}: its CURRENT file or the manifest it names cannot be read`)
  const tmp = os.tmpdir()
  await removeStale(tmp)
  let root
  try {
    const { start, ns, boot } = await whoAmI()
    root = await fs.mkdtemp(path.join(tmp, `kfs-readonly-${process.pid}-${start}-${ns}-${boot}-`))
    roots.add(root)
    // Only its owner can change what is in it: the sweep removes nothing else.
    await fs.chmod(root, 0o700)
    // A process that ends without closing its stores (process.exit(), an uncaught
    // error) leaves no shadow behind either; a crash or a signal leaves it to removeStale().
    if (!exitHooked) process.once('exit', removeShadowsSync)
    exitHooked = true
    const dir = path.join(root, path.basename(location))
    await fs.mkdir(dir)
    let replays = false
    for (const name of names.filter((n) => linked(n, manifest.nextFile))) {
      await fs.symlink(path.join(location, name), path.join(dir, name))
      if (name.endsWith('.log') && (await fs.stat(path.join(dir, name)).then((s) => s.size, () => 0)) > 0) replays = true
    }
    if (!replays) await blockCompactions(dir, manifest.nextFile + 1)
    shadowed.set(location, (shadowed.get(location) || 0) + 1)
    return { dir, tmp, remove: once(() => unshadow(location, root)) }
  } catch (err) {
    if (root) await removeRoot(root).catch(() => {})
    throw failure('system', `the shadow of ${location} in ${tmp} could not be made: ${err.message}`, { code: err.code, cause: err })
  }
}

// LevelDB compacts as it sees fit, also while it only reads (reads that search several
// tables, or a compaction left pending: measured, reading a 400 MiB database three
// times over rewrote all of it into the shadow). The only tables it makes are those of
// compactions and of the logs an open replays, each numbered with the next file number:
// a directory in the place of each of the next BLOCKED tables makes the first compaction
// fail (EISDIR), and LevelDB then starts none (a background error, kept until close,
// which reads do not look at). Once open, blocked from the next file number its new
// manifest records (`from` undefined). Before an open that replays no log, from the
// original's next file number + 1 (the new manifest takes that number; the new log,
// not a table, the next), so that no compaction the open starts gets through either;
// otherwise such a compaction writes its first tables before the blocks are in place.
const BLOCKED = 16

async function blockCompactions (dir, from) {
  try {
    if (from === undefined) {
      const manifest = await readManifest(dir)
      if (!manifest) throw new Error('the manifest LevelDB wrote cannot be read')
      from = manifest.nextFile
    }
    for (let n = from; n < from + BLOCKED; n++) {
      await fs.mkdir(path.join(dir, `${String(n).padStart(6, '0')}.ldb`)).catch((err) => {
        if (err.code !== 'EEXIST') throw err // made by a compaction already
      })
    }
  } catch (err) {
    throw failure('system', `${dir}: ${err.message}`, { code: err.code || 'EIO', cause: err })
  }
}

function linked (name, nextFile) {
  if (OWN.has(name)) return false
  const numbered = NUMBERED.exec(name)
  return !numbered || Number(numbered[1] ?? numbered[2]) < nextFile
}

async function unshadow (location, root) {
  const count = shadowed.get(location) - 1
  if (count > 0) shadowed.set(location, count)
  else shadowed.delete(location)
  await removeRoot(root)
}

async function removeRoot (root) {
  await fs.rm(root, { recursive: true, force: true })
  roots.delete(root)
}

// For a process about to end without closing its stores (killed by a signal): removes
// every shadow, which would otherwise be left in os.tmpdir().
function removeShadowsSync () {
  for (const root of roots) {
    try {
      rmSync(root, { recursive: true, force: true, maxRetries: 2 })
    } catch {
      // LevelDB's threads may still write there: what is left is left
    }
  }
  roots.clear()
}

const SHADOW = /^kfs-readonly-(\d+)-(\d+)-(\d+)-([0-9a-f]+)-/
const SWEEP_MS = 60000 // how often a process looks for stale shadows, at most
let swept // { tmp, at, done }: the last look

// Removes the shadows in `tmp` of processes that are gone. Never rejects: what cannot be
// removed is not this process's to remove.
function removeStale (tmp) {
  if (!swept || swept.tmp !== tmp || Date.now() - swept.at > SWEEP_MS) {
    swept = { tmp, at: Date.now(), done: sweep(tmp).catch(() => {}) }
  }
  return swept.done
}

async function sweep (tmp) {
  const { ns, boot } = await whoAmI()
  for (const name of await fs.readdir(tmp)) {
    const owner = SHADOW.exec(name)
    if (owner && owner[3] === ns && owner[4] === boot && await gone(Number(owner[1]), owner[2]) && await ours(path.join(tmp, name))) {
      await fs.rm(path.join(tmp, name), { recursive: true, force: true }).catch(() => {})
    }
  }
}

// Whether `entry` is a directory (not a symbolic link) of this process's user that
// nobody else can write to or enter (0700, as makeShadow leaves its shadows): anyone can
// name an entry of a shared /tmp like a shadow, and a root process removing one of
// another user's would remove what that user made it point to, swapping a directory
// in it for a link while the removal runs. In a sticky /tmp nobody else can rename or
// remove this user's entry either, so what it is does not change before the removal.
async function ours (entry) {
  const stats = await fs.lstat(entry).catch(() => undefined)
  return Boolean(stats && stats.isDirectory() && stats.uid === process.geteuid() && (stats.mode & 0o7777) === 0o700)
}

// Whether the process that made a shadow has ended: no process has its pid (signal 0
// fails with anything but EPERM, which means one of another user), or the one that has
// it started at another time.
async function gone (pid, start) {
  if (!(pid > 0)) return false
  if (pid !== process.pid) {
    try {
      process.kill(pid, 0)
    } catch (err) {
      if (err.code !== 'EPERM') return true
    }
  }
  const now = await startOf(pid)
  return now !== undefined && start !== '0' && now !== start
}

// A process's start time (clock ticks since boot, /proc/PID/stat's 22nd field), or
// undefined where there is no /proc or no such process.
async function startOf (pid) {
  const stat = await fs.readFile(`/proc/${pid}/stat`, 'utf8').catch(() => undefined)
  return stat && stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19]
}

// This process's { start, ns, boot }: its start time, its pid namespace's inode number
// and the start of the boot id.
let self
const whoAmI = () => (self = self || Promise.all([
  startOf(process.pid),
  fs.readlink('/proc/self/ns/pid').then((link) => /\[(\d+)\]/.exec(link)?.[1], () => undefined),
  fs.readFile('/proc/sys/kernel/random/boot_id', 'utf8').then((id) => /^[0-9a-f]{8}/.exec(id)?.[0], () => undefined)
]).then(([start, ns, boot]) => ({ start: start ?? '0', ns: ns ?? '0', boot: boot ?? '0' })))

function once (fn) {
  let done
  return () => (done = done || fn())
}

// Whether this process has the database at `location` open through a shadow.
const isShadowed = (location) => shadowed.has(path.resolve(location))

module.exports = { makeShadow, blockCompactions, isShadowed, removeShadowsSync }

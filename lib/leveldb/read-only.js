'use strict'

// LevelDB 1.20 cannot open a database without writing to it: it takes LOCK (opened
// read-write), starts a new LOG, writes a new MANIFEST and CURRENT, turns replayed logs
// into tables and deletes what these replace. A database that must not change (a
// read-only mount, a backup, a copy without write permission) is opened through a shadow:
// a directory under os.tmpdir() of symbolic links to its files. LevelDB writes into the
// shadow, deletes links, and reads tables and logs through the links.
// It must never open a linked file for writing. Without reuse_logs (leveldown never sets
// it) LevelDB writes only new files, numbered from the manifest's next file number on:
// tables, logs, the manifest, CURRENT's NNNNNN.dbtmp (renamed over the CURRENT link). A
// crash can leave files with such numbers, whose names LevelDB would reuse: not linked.
// Logs are linked whatever their number (LevelDB numbers its new files past them). LOCK,
// LOG and LOG.old are not linked: LevelDB makes its own.
// A shadow is named kfs-readonly-PID-START-NS-BOOT-XXXXXX: START the process's start time
// (a pid used again), NS its pid namespace (the only pids it can check), BOOT the boot
// id's first 8 hex digits (hosts sharing a temporary directory on NFS, and boots); each 0
// without /proc. close() and the process's exit remove it; one a killed process left is
// removed by the next process of the same namespace and boot to make a shadow there.
const fs = require('node:fs/promises')
const { rmSync } = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { readManifest, lockHeld } = require('./log-guard')

const OWN = new Set(['LOCK', 'LOG', 'LOG.old'])
const NUMBERED = /^(?:(\d+)\.(?:ldb|sst|dbtmp)|MANIFEST-(\d+))$/

// location -> shadows open in this process: a read-write open would change their files.
const shadowed = new Map()
const roots = new Set() // the shadows' directories, for removeShadowsSync()
let exitHooked = false

const failure = (reason, message, props) => Object.assign(new Error(message), { reason, ...props })

// Resolves to { dir, tmp (the temporary directory it is in), remove() }, or rejects with
// a `reason` as open.js does ('locked': a process holds it and would change its files).
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
    await fs.chmod(root, 0o700)
    // process.exit() leaves no shadow either; a signal leaves it to removeStale().
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

// LevelDB compacts also while it only reads (measured: reading a 400 MiB database three
// times rewrote all of it into the shadow). Its tables are numbered with the next file
// number: a directory in the place of each of the next BLOCKED makes the first compaction
// fail (EISDIR), and LevelDB starts no more (a background error that reads ignore). Once
// open, blocked from its new manifest's next file number (`from` undefined); before an
// open that replays no log, from the original's + 1 (the new manifest takes that number),
// so no compaction the open starts gets through either.
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

// For a process about to end without closing its stores (a signal).
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

// Removes the shadows in `tmp` of processes that are gone; never rejects.
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

// Whether `entry` is a directory (not a link) of this user that nobody else can write or
// enter (0700, as makeShadow leaves it): anyone can name an entry of /tmp like a shadow,
// and root removing another user's would follow the links that user swapped in during
// the removal. In a sticky /tmp nobody else can rename or remove this user's entry.
async function ours (entry) {
  const stats = await fs.lstat(entry).catch(() => undefined)
  return Boolean(stats && stats.isDirectory() && stats.uid === process.geteuid() && (stats.mode & 0o7777) === 0o700)
}

// No process has its pid (signal 0 fails, not with EPERM), or the one that has it
// started at another time.
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

// A process's start time (/proc/PID/stat's 22nd field), or undefined.
async function startOf (pid) {
  const stat = await fs.readFile(`/proc/${pid}/stat`, 'utf8').catch(() => undefined)
  return stat && stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19]
}

// This process's { start, ns (its pid namespace's inode), boot }.
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

const isShadowed = (location) => shadowed.has(path.resolve(location))

module.exports = { makeShadow, blockCompactions, isShadowed, removeShadowsSync }

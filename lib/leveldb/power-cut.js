'use strict'

// Two states LevelDB 1.20 can leave after a power cut and then refuses to open, on a
// filesystem that writes back whatever calls it holds since the last fsync, in any
// order. Neither loses a write, and kfs puts both right before opening again:
//
// - A flush or compaction syncs its new table (not its directory), then appends its
//   edit to the manifest and syncs that: PosixWritableFile::Sync syncs the directory
//   first (SyncDirIfManifest, util/env_posix.cc), but log::Writer::AddRecord has
//   already written the edit (VersionSet::LogAndApply, db/version_set.cc). The edit can
//   persist while the table's name does not: "Corruption: 1 missing files". Its sync
//   then never finished, so nothing that follows it happened: its inputs and the log
//   it flushed are still there. Dropping that last edit gives the database as it was.
// - An open writes a new manifest (synced, its directory first), points CURRENT to it
//   by a rename it does not sync (SetCurrentFile, db/filename.cc), then deletes the old
//   manifest (DeleteObsoleteFiles, db/db_impl.cc). The deletion can persist while the
//   rename does not: CURRENT names a manifest that is gone. The new one was whole and
//   synced before the rename began: CURRENT is pointed to it.
//
// Anything else missing is damage, left for LevelDB to report and `repair` to recover.
const fs = require('node:fs/promises')
const path = require('node:path')
const { syncDir } = require('../base/sync-dir')
const { manifestEdits, replay } = require('./manifest')
const { lockHeld } = require('./log-guard')

const MANIFEST = /^MANIFEST-(\d+)$/
const TABLE = /^(\d+)\.(?:ldb|sst)$/
const LOG = /^(\d+)\.log$/
const numbers = (names, pattern) => new Set(names.map((name) => pattern.exec(name)).filter(Boolean).map((m) => Number(m[1])))

// Puts right what a power cut left of the database at `dir`, as above. Resolves to
// whether it changed anything (then open it again).
async function recoverCut (dir) {
  if (await lockHeld(dir)) return false // its holder's to open
  const names = await fs.readdir(dir)
  const current = (await fs.readFile(path.join(dir, 'CURRENT'), 'latin1').catch(() => '')).slice(0, -1)
  if (!MANIFEST.test(current)) return false
  const files = { tables: numbers(names, TABLE), logs: numbers(names, LOG) }
  if (!names.includes(current)) return pointCurrent(dir, names, Number(MANIFEST.exec(current)[1]), files)
  return dropUnsyncedEdit(dir, current, files)
}

// CURRENT names manifest `named`, which is gone: points it to the newest manifest, if
// that is newer and all its tables are there.
async function pointCurrent (dir, names, named, files) {
  const newest = Math.max(...numbers(names, MANIFEST))
  if (!(newest > named)) return false
  const name = `MANIFEST-${String(newest).padStart(6, '0')}`
  const edits = manifestEdits(await fs.readFile(path.join(dir, name)))
  const { state, live } = edits ? replay(edits) : {}
  if (!state || missing(live, files).length) return false
  const tmp = path.join(dir, 'CURRENT.kfs-tmp') // a name LevelDB ignores
  await fs.writeFile(tmp, `${name}\n`, { flush: true })
  await fs.rename(tmp, path.join(dir, 'CURRENT'))
  await syncDir(dir)
  return true
}

// The manifest's last edit names a table that is missing: cuts it off, if without it
// every table is there, and the log it flushed too.
async function dropUnsyncedEdit (dir, current, files) {
  const file = path.join(dir, current)
  const edits = manifestEdits(await fs.readFile(file))
  if (!edits || edits.length < 2) return false
  const last = edits[edits.length - 1]
  const before = replay(edits.slice(0, -1))
  if (!before.state || missing(new Set(last.added), files).length === 0) return false
  if (missing(before.live, files).length) return false
  for (const log of [before.state.logNumber, before.state.prevLogNumber]) {
    const flushed = last.logNumber !== undefined && log > 0 && log < last.logNumber
    if (flushed && !files.logs.has(log)) return false
  }
  const handle = await fs.open(file, 'r+')
  try {
    await handle.truncate(last.start)
    await handle.sync()
  } finally {
    await handle.close()
  }
  return true
}

function missing (live, { tables }) {
  return [...live].filter((n) => !tables.has(n))
}

module.exports = { recoverCut }

'use strict'

// Two states LevelDB 1.20 can leave after a power cut (the filesystem writing back any
// calls since the last fsync, in any order) and then refuses to open. Neither loses a
// write; both are put right before opening again:
// - A flush or compaction syncs its new table (not its directory), then appends its edit
//   to the manifest (log::Writer::AddRecord in VersionSet::LogAndApply) before the sync
//   that syncs the directory (SyncDirIfManifest, util/env_posix.cc). The edit can persist
//   while the table's name does not: "Corruption: 1 missing files". Nothing after that
//   sync happened, so its inputs and flushed log are still there: the edit is dropped.
// - An open writes a new manifest (synced, its directory first), renames CURRENT to it
//   without a sync (SetCurrentFile, db/filename.cc), then deletes the old manifest. The
//   deletion can persist while the rename does not: CURRENT is pointed to the new one.
// Anything else missing is damage, for LevelDB to report and `repair` to recover.
const fs = require('node:fs/promises')
const path = require('node:path')
const { syncDir } = require('../base/sync-dir')
const { manifestEdits, replay } = require('./manifest')
const { lockHeld } = require('./log-guard')

const MANIFEST = /^MANIFEST-(\d+)$/
const TABLE = /^(\d+)\.(?:ldb|sst)$/
const LOG = /^(\d+)\.log$/
const numbers = (names, pattern) => new Set(names.map((name) => pattern.exec(name)).filter(Boolean).map((m) => Number(m[1])))

// Resolves to whether it changed anything at `dir` (then open it again).
async function recoverCut (dir) {
  if (await lockHeld(dir)) return false // its holder's to open
  const names = await fs.readdir(dir)
  const current = (await fs.readFile(path.join(dir, 'CURRENT'), 'latin1').catch(() => '')).slice(0, -1)
  if (!MANIFEST.test(current)) return false
  const files = { tables: numbers(names, TABLE), logs: numbers(names, LOG) }
  if (!names.includes(current)) return pointCurrent(dir, names, Number(MANIFEST.exec(current)[1]), files)
  return dropUnsyncedEdit(dir, current, files)
}

// CURRENT names a manifest that is gone: points it to a newer one whose tables are there.
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

// The last edit names a missing table: cut off if, without it, every table and the log
// it flushed are there.
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

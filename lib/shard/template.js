'use strict'

const fs = require('node:fs/promises')
const path = require('node:path')
const crypto = require('node:crypto')
const { syncDir } = require('../base/sync-dir')

// A new shard is always the same bytes (LevelDB 1.20): the store builds one shard with LevelDB
// (create.js) and makes each new one by writing its files, in half the time (doc/performance.md).
// Any other set of files (another LevelDB) is refused: each shard is then built with LevelDB.
const NEW_SHARD_FILES = ['000004.log', '000005.ldb', 'CURRENT', 'LOCK', 'MANIFEST-000002']
const SYNCED = new Set(['000005.ldb', 'CURRENT', 'MANIFEST-000002']) // LevelDB syncs these; the others are empty

// The files of the shard built at `dir`: [[name, Buffer]], or undefined if not the set above.
async function readTemplate (dir) {
  const names = (await fs.readdir(dir)).filter((name) => name !== 'LOG' && name !== 'LOG.old').sort()
  if (names.join('/') !== NEW_SHARD_FILES.join('/')) return undefined
  const files = []
  for (const name of names) files.push([name, await fs.readFile(path.join(dir, name))])
  if (files.some(([name, data]) => SYNCED.has(name) !== data.length > 0)) return undefined
  return files
}

// Writes the template's files into a new directory in `tmpDir`, each synced and the directory
// too, and returns its path; on failure nothing is left. `serial`: one sync at a time, leaving
// libuv's other threads to the work that waits for them (spares.js).
async function writeFromTemplate (files, tmpDir, name, { serial = false } = {}) {
  const staging = path.join(tmpDir, `${name}-${crypto.randomBytes(4).toString('hex')}`)
  const handles = []
  const synced = [] // handles of the files LevelDB syncs
  let failure
  try {
    await fs.mkdir(staging)
    // All settled before a failure is cleaned up: no write may land after the removal.
    const settled = async (work) => {
      const failed = (await Promise.allSettled(work)).find((r) => r.status === 'rejected')
      if (failed) throw failed.reason
    }
    await settled(files.map(async ([file, data]) => {
      // LOCK as LevelDB makes it (0644); the others as fopen() does (0666), less the umask.
      const handle = await fs.open(path.join(staging, file), 'wx', file === 'LOCK' ? 0o644 : 0o666)
      handles.push(handle)
      await handle.writeFile(data)
      if (data.length) synced.push(handle)
    }))
    const syncs = [...synced.map((h) => () => h.sync()), () => syncDir(staging)]
    if (serial) for (const sync of syncs) await sync() // nothing else in flight on failure
    else await settled(syncs.map((sync) => sync()))
  } catch (err) {
    failure = err
  }
  await Promise.allSettled(handles.map((h) => h.close()))
  if (!failure) return staging
  await fs.rm(staging, { recursive: true, force: true }).catch(() => {}) // the failure is what matters
  throw failure
}

module.exports = { readTemplate, writeFromTemplate }

'use strict'

const fs = require('node:fs/promises')
const path = require('node:path')
const crypto = require('node:crypto')
const { LevelDb } = require('../leveldb/leveldb')
const { syncDir } = require('../base/sync-dir')
const { readTemplate, writeFromTemplate } = require('./template')
const records = require('./records')
const errors = require('../api/errors')

// Builds an empty shard in `tmpDir` and renames it into place: a crash never leaves a half-made
// shard that would look damaged, and a failure here is never damage. `template`: the files of a
// new shard (makeTemplate). `placed: false` leaves syncing the shard into its directory
// (syncPlaced) to the caller, before it writes into the shard. `spare`: a shard made already in
// `tmpDir` (spares.js), renamed instead of making one; removed if that fails.
async function createShard (location, tmpDir, template, { placed = true, spare } = {}) {
  const name = path.basename(location)
  let staging = spare
  try {
    // rename() would replace an empty directory: whatever is in the way is not ours to take.
    const inTheWay = await fs.stat(location).then(() => true, () => false)
    if (inTheWay) throw errors.system(`shard ${name} could not be created`, { code: 'EEXIST', message: `${location} exists but this store never created it` })
    if (!staging) staging = template ? await writeFromTemplate(template, tmpDir, name) : await buildShard(tmpDir, name)
    await fs.rename(staging, location)
    staging = undefined
  } catch (err) {
    if (staging) await fs.rm(staging, { recursive: true, force: true })
    throw creationFailed(name, err)
  }
  if (placed) await syncPlaced(location)
}

// Syncs a new shard's directory entry. A failure leaves a shard that exists, whose rename may
// not survive a power cut: sync again before writing into it.
function syncPlaced (location) {
  return syncDir(path.dirname(location)).catch((err) => { throw creationFailed(path.basename(location), err) })
}

async function makeTemplate (tmpDir) {
  let built
  try {
    built = await buildShard(tmpDir, 'template')
    return await readTemplate(built)
  } catch (err) {
    throw creationFailed('template', err)
  } finally {
    if (built) await fs.rm(built, { recursive: true, force: true })
  }
}

async function buildShard (tmpDir, name) {
  const staging = path.join(tmpDir, `${name}-${crypto.randomBytes(4).toString('hex')}`)
  try {
    // Made here: LevelDB ignores a failed mkdir, then reports the missing LOCK file as damage.
    await fs.mkdir(staging)
    const db = await LevelDb.open(staging, { createIfMissing: true, errorIfExists: true })
    try {
      await db.batch([
        { type: 'put', key: records.ACCOUNT, value: JSON.stringify({ used: 0, files: 0 }) },
        { type: 'put', key: records.HEADS, value: '3' }
      ], { sync: true })
      // Into a table: a log LevelDB cannot open (out of descriptors) is skipped and forgotten.
      await db.flush()
    } finally {
      await db.close()
    }
    // Its entries durable before it is in place: LevelDB 1.20 does not sync the directory after
    // renaming CURRENT or removing a replayed log.
    await syncDir(staging)
    return staging
  } catch (err) {
    await fs.rm(staging, { recursive: true, force: true })
    throw err
  }
}

function creationFailed (name, err) {
  if (err.code === 'ENOSPC' && !err.disk) return errors.diskFull(`shard ${name} could not be created`, err.message, { cause: err })
  if (err.code) return err
  return errors.system(`shard ${name} could not be created`, { code: 'EIO', message: err.message }, { cause: err })
}

module.exports = { createShard, syncPlaced, makeTemplate }

'use strict'

const fs = require('node:fs/promises')
const path = require('node:path')
const crypto = require('node:crypto')
const { LevelDb } = require('../leveldb/leveldb')
const { syncDir } = require('../dir/sync-dir')
const records = require('./records')
const errors = require('../api/errors')

// Builds an empty shard in `tmpDir` and renames it into place, so a crash
// mid-creation never leaves a half-made shard that would later look damaged. A
// failure here is never damage: the shard did not exist.
async function createShard (location, tmpDir) {
  // rename() would replace an empty directory: whatever is in the way is not ours to take.
  const inTheWay = await fs.stat(location).then(() => true, () => false)
  if (inTheWay) throw errors.system(`shard ${path.basename(location)} could not be created`, { code: 'EEXIST', message: `${location} exists but this store never created it` })
  const staging = path.join(tmpDir, `${path.basename(location)}-${crypto.randomBytes(4).toString('hex')}`)
  try {
    // Made here, not by LevelDB, which ignores a failed mkdir and then reports the
    // missing LOCK file as damage.
    await fs.mkdir(staging)
    const db = await LevelDb.open(staging, { createIfMissing: true, errorIfExists: true })
    try {
      await db.put(records.ACCOUNT, JSON.stringify({ used: 0, files: 0 }), { sync: true })
      // Into a table: a shard's first open then replays no log. LevelDB skips a log
      // it cannot open (out of descriptors) and forgets it: the record would be lost.
      await db.flush()
    } finally {
      await db.close()
    }
    // Its entries durable before it is in place. LevelDB 1.20 happens to sync the
    // directory with its manifest, but not after renaming CURRENT or removing a
    // replayed log: a shard must not depend on the order of its work.
    await syncDir(staging)
    await fs.rename(staging, location)
    await syncDir(path.dirname(location)) // a failure here leaves a shard that exists
  } catch (err) {
    await fs.rm(staging, { recursive: true, force: true })
    if (err.code === 'ENOSPC' && !err.disk) throw errors.diskFull(`shard ${path.basename(location)} could not be created`, err.message, { cause: err })
    if (err.code) throw err
    throw errors.system(`shard ${path.basename(location)} could not be created`, { code: 'EIO', message: err.message }, { cause: err })
  }
}

module.exports = { createShard }

'use strict'

const { DbFiles } = require('../leveldb/files')
const records = require('./records')
const scans = require('./scans')

// On a page read from a shard's files: what the next page of the same listing reads.
const FILES = Symbol('kfs.files')

// The records a listing reads: the accounting record, which every shard LevelDB opens
// holds, to the last metadata record.
const LISTED = { gte: records.ACCOUNT, lt: records.metaRange().lt }

// Up to `limit` metadata records of the shard `index` at `location` after the key
// `after` (from the first without it), as scans.metaPage reads them, read from the
// shard's files while nobody has it open: nothing is written, made or synced
// (leveldb/files.js). Undefined where the files are not for certain what LevelDB would
// read: anything they hold that the reader does not know (damage among it), or a
// shard that its open would refuse (its accounting record missing or unreadable). The
// caller then opens the shard, which reports what is wrong as a listing always did.
// `files`: page[FILES] of the page before.
async function filePage (location, index, after, limit, files) {
  try {
    if (!files) {
      files = await DbFiles.open(location, LISTED)
      const [account] = await files.read({ gte: records.ACCOUNT, lte: records.ACCOUNT }, 1)
      if (!account) return undefined
      JSON.parse(account.value)
    }
    const range = records.metaRange()
    if (after !== undefined) range.gt = records.metaKey(after)
    const entries = await files.read(range, limit)
    const page = entries.map((entry) => scans.metaEntry(entry.key, entry.value, index))
    page[FILES] = files
    return page
  } catch {
    return undefined
  }
}

module.exports = { filePage, FILES }

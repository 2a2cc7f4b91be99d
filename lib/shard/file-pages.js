'use strict'

const { DbFiles } = require('../leveldb/files')
const records = require('./records')
const scans = require('./scans')

// On a page read from a shard's files: what the next page of the same listing reads.
const FILES = Symbol('kfs.files')

// The records a listing reads: the accounting record, which every shard holds, to the last
// metadata record.
const LISTED = { gte: records.ACCOUNT, lt: records.metaRange().lt }

// Up to `limit` metadata records after the key `after`, as scans.metaPage reads them, read from
// the files of a shard nobody has open (leveldb/files.js). Undefined where the files are not for
// certain what LevelDB would read, or its open would fail: the caller then opens the shard.
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

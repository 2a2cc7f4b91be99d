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

// The earliest time in the expiry index of a shard nobody has open, read from its files
// (leveldb/files.js), or undefined if it has none. Rejects where its files are not for
// certain what LevelDB would read: the caller then opens the shard.
async function fileFirstExpiry (location) {
  const range = records.expiryRange()
  const files = await DbFiles.open(location, range)
  const [first] = await files.read(range, 1)
  return first ? records.parseExpiryKey(first.key).expires : undefined
}

module.exports = { filePage, fileFirstExpiry, FILES }

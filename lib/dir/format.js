'use strict'

const fs = require('node:fs/promises')
const path = require('node:path')
const crypto = require('node:crypto')
const { syncDir } = require('../base/sync-dir')
const { SHARD_COUNT } = require('../base/shard-names')
const errors = require('../api/errors')

// format.json: the options a store was created with, for its lifetime. Format 2 added a
// digest to every chunk record, format 3 a head record to every file (doc/format.md). An
// older store is upgraded when it opens: its files keep their records, new writes use
// the new ones, and format.json keeps older kfs versions out (ENOTSUP).
const FORMAT_VERSION = 3
const OLDEST_FORMAT = 1
const FORMAT_FILE = 'format.json'

function checkOptions (given, format) {
  checkOption('referenceId', given.referenceId, format.referenceId)
  checkOption('shardCount', given.shardCount, format.shardCount)
  checkOption('maxTableSize', given.maxTableSize && Math.floor(given.maxTableSize / format.shardCount), format.shardCap, ' per shard')
  checkOption('chunkSize', given.chunkSize, format.chunkSize)
}

function checkOption (name, given, stored, unit = '') {
  if (given !== undefined && given !== stored) {
    throw errors.invalidValue(`options.${name}`, `gives ${given}${unit} but the store was created with ${stored}${unit}`)
  }
}

async function writeFormat (dir, format) {
  const file = path.join(dir, FORMAT_FILE)
  const tmp = `${file}.${crypto.randomBytes(4).toString('hex')}`
  const handle = await fs.open(tmp, 'wx')
  try {
    await handle.writeFile(JSON.stringify(format, null, 2) + '\n')
    await handle.sync()
  } finally {
    await handle.close()
  }
  await fs.rename(tmp, file)
  await syncDir(dir)
}

async function readFormat (dir) {
  const file = path.join(dir, FORMAT_FILE)
  let format
  try {
    format = JSON.parse(await fs.readFile(file, 'utf8'))
  } catch (err) {
    throw errors.corrupt(`the format file ${file}`, err.message, { path: dir, cause: err })
  }
  if (format && Number.isInteger(format.format) && format.format > FORMAT_VERSION) throw errors.newerFormat(file, format.format, FORMAT_VERSION)
  const valid = format && Number.isInteger(format.format) && format.format >= OLDEST_FORMAT && /^[0-9a-f]{40}$/.test(format.referenceId) &&
    Number.isSafeInteger(format.chunkSize) && format.chunkSize > 0 && Number.isSafeInteger(format.shardCap) && format.shardCap > 0 &&
    Number.isInteger(format.shardCount) && format.shardCount >= 1 && format.shardCount <= SHARD_COUNT && (format.shardCount & (format.shardCount - 1)) === 0
  if (!valid) throw errors.corrupt(`the format file ${file}`, `it is not a kfs format ${OLDEST_FORMAT} to ${FORMAT_VERSION} record`, { path: dir })
  return format
}

module.exports = { FORMAT_VERSION, FORMAT_FILE, readFormat, writeFormat, checkOptions }

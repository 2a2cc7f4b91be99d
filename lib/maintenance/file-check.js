'use strict'

const { ChunkReader, readVersion } = require('../data/chunk-reader')
const scans = require('../shard/scans')
const records = require('../shard/records')

// A damaged file, as opposed to a failure of the check itself.
const isDamage = (err) => err.code === 'EINTEGRITY' || err.code === 'ECORRUPT'

// Reads one committed file whole (indexes, lengths, chunk digests, SHA-256). Resolves
// to undefined if it is sound or was removed meanwhile, else to what is wrong, in words.
async function checkFile (shard, key, chunkSize) {
  let reader
  try {
    reader = await ChunkReader.open({ lease: { shard, release () {} }, key, chunkSize, sha256: 'always' }) // the caller holds the shard
    while ((await reader.read()) !== undefined);
    return await disagreement(shard, reader.meta)
  } catch (err) {
    if (err.code === 'ENOENT') return undefined
    if (isDamage(err)) return err.message
    throw err
  } finally {
    if (reader) await reader.close()
  }
}

// What the head record of a version read (`head`) and the metadata record of its file
// disagree on, in words, if anything. Both are written in one batch: a disagreement is
// damage. A file replaced or removed meanwhile is not: a head of another version than
// the metadata's is damage only if both are still the same once read again.
async function disagreement (shard, head) {
  if (head.format === undefined) return undefined
  const meta = await shard.getMeta(head.key)
  if (!meta) return undefined
  if (meta.version !== head.version) {
    const now = await readVersion(shard, head.key)
    const again = await shard.getMeta(head.key)
    return now && again && now.meta.version === head.version && again.version === meta.version
      ? `its head record is of version ${head.version}, its metadata record of ${meta.version}`
      : undefined
  }
  const fields = ['size', 'chunks', 'sha256', 'mtime'].filter((field) => meta[field] !== head[field])
  if (Boolean(meta.inline) !== Boolean(head.inline)) fields.push('inline')
  return fields.length ? `its head record and its metadata record disagree on ${fields.join(', ')}` : undefined
}

// The keys of head records left without a metadata record (damage: a read finds the
// file, nothing else does). A candidate of the scans (two snapshots) is one only if its
// head is the same version before and after its metadata was found missing: head and
// metadata change together, in one batch.
async function headsWithoutMeta (shard) {
  const left = []
  for await (const key of scans.headsWithoutMeta(shard.db)) {
    const before = await shard.db.get(key)
    if (before === undefined || (await shard.getMeta(key))) continue
    const after = await shard.db.get(key)
    if (after !== undefined && after.toString('hex', 8, 16) === before.toString('hex', 8, 16)) left.push(key)
  }
  return left
}

function parseAccount (value) {
  try {
    const account = JSON.parse(value)
    return Number.isSafeInteger(account.used) && Number.isSafeInteger(account.files) ? account : null
  } catch {
    return null
  }
}

// Compares the accounting record with the metadata, in one snapshot (the record, '!a',
// sorts before the metadata records).
async function checkAccounting (shard) {
  let account
  let used = 0
  let files = 0
  for await (const entry of shard.db.scan({ gte: records.ACCOUNT, lt: records.META + '\xff', valueAsBuffer: false })) {
    if (entry.key === records.ACCOUNT) account = parseAccount(entry.value)
    else if (entry.key.startsWith(records.META)) {
      files++
      try {
        used += records.decodeMeta(entry.value, shard.index, entry.key.slice(records.META.length)).size
      } catch {
        // counted as a file of size 0: verify() reports the record itself
      }
    }
  }
  if (account === null) return 'its accounting record is unreadable'
  if (!account) return 'its accounting record is missing'
  if (account.used !== used || account.files !== files) {
    return `its accounting says ${account.files} files of ${account.used} bytes, its metadata ${files} files of ${used} bytes`
  }
  return undefined
}

module.exports = { checkFile, checkAccounting, headsWithoutMeta }

'use strict'

const { ChunkReader, readVersion } = require('../data/chunk-reader')
const scans = require('../shard/scans')
const records = require('../shard/records')

// Damage, as opposed to a failure of the check.
const isDamage = (err) => err.code === 'EINTEGRITY' || err.code === 'ECORRUPT'

// Reads one committed file whole (indexes, lengths, digests, SHA-256): undefined if it
// is sound or was removed meanwhile, else what is wrong, in words.
async function checkFile (shard, key, chunkSize) {
  let reader
  try {
    // The caller holds the shard. A file in the trash is checked: a restore brings it back.
    reader = await ChunkReader.open({ lease: { shard, release () {} }, key, chunkSize, sha256: 'always', withTrash: true })
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

// What a head record and its file's metadata record disagree on, if anything: both are
// written in one batch. A head of another version is damage only if both are the same
// once read again (not replaced or removed meanwhile).
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
  const fields = ['size', 'chunks', 'sha256', 'mtime', 'expires', 'trashed'].filter((field) => meta[field] !== head[field])
  if (Boolean(meta.inline) !== Boolean(head.inline)) fields.push('inline')
  return fields.length ? `its head record and its metadata record disagree on ${fields.join(', ')}` : undefined
}

// The keys of head records without a metadata record (a read finds the file, nothing
// else does). The scans are two snapshots: a candidate is one only if its head is the
// same version before and after its metadata was found missing.
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

// The keys of files with an expiry whose expiry record is missing or names another version:
// the collector would never remove them. Two snapshots: a candidate is one only if its
// metadata is the same version once the record was found missing.
async function unindexed (shard) {
  const index = new Map()
  for await (const entry of shard.db.scan({ ...records.expiryRange(), valueAsBuffer: false })) index.set(entry.key, entry.value)
  const left = []
  for await (const meta of decodedMetas(shard)) {
    const { key } = meta
    const id = meta.expires === undefined ? undefined : records.expiryKey(meta.expires, key)
    if (id === undefined || index.get(id) === meta.version) continue
    const again = await shard.getMeta(key)
    const record = again && again.version === meta.version ? await shard.db.get(id) : undefined
    if (again && again.version === meta.version && String(record) !== meta.version) left.push(key)
  }
  return left
}

// The keys of files marked trashed without their trash record (restoreTrash would not count
// them, nor emptyTrash remove them). Two snapshots, as unindexed().
async function unindexedTrash (shard) {
  const index = new Set()
  for await (const entry of shard.db.scan({ ...records.trashRange(0), values: false })) index.add(entry.key)
  const left = []
  for await (const meta of decodedMetas(shard)) {
    const { key } = meta
    if (meta.trashed === undefined || index.has(records.trashKey(meta.trashed, key))) continue
    const again = await shard.getMeta(key)
    if (again && again.trashed === meta.trashed && (await shard.db.get(records.trashKey(meta.trashed, key))) === undefined) left.push(key)
  }
  return left
}

// The shard's metadata records that decode; verify() reports the others.
async function * decodedMetas (shard) {
  for await (const entry of shard.db.scan({ ...records.metaRange(), valueAsBuffer: false })) {
    const key = entry.key.slice(records.META.length)
    let meta
    try {
      meta = records.decodeMeta(entry.value, shard.index, key)
    } catch {
      continue
    }
    yield meta
  }
}

function parseAccount (value) {
  try {
    const account = JSON.parse(value)
    return Number.isSafeInteger(account.used) && Number.isSafeInteger(account.files) ? account : null
  } catch {
    return null
  }
}

// The accounting record against the metadata, in one snapshot ('!a' sorts first).
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

module.exports = { checkFile, checkAccounting, headsWithoutMeta, unindexed, unindexedTrash }

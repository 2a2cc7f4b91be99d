'use strict'

const { ChunkReader } = require('../data/chunk-reader')
const records = require('../shard/records')

// A damaged file, as opposed to a failure of the check itself.
const isDamage = (err) => err.code === 'EINTEGRITY' || err.code === 'ECORRUPT'

// Reads one committed file whole (indexes, lengths, chunk digests, SHA-256). Resolves
// to undefined if it is sound or was removed meanwhile, else to what is wrong, in words.
async function checkFile (shard, key, chunkSize) {
  let reader
  try {
    reader = await ChunkReader.open({ shard, key, chunkSize, sha256: 'always' })
    while ((await reader.read()) !== undefined);
    return undefined
  } catch (err) {
    if (err.code === 'ENOENT') return undefined
    if (isDamage(err)) return err.message
    throw err
  } finally {
    if (reader) await reader.close()
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

async function * scan (db, range) {
  const it = db.iterator(range)
  try {
    for (let entry = await it.next(); entry; entry = await it.next()) yield entry
  } finally {
    await it.end()
  }
}

// Compares the accounting record with the metadata, in one snapshot (the record, '!a',
// sorts before the metadata records).
async function checkAccounting (shard) {
  let account
  let used = 0
  let files = 0
  for await (const entry of scan(shard.db, { gte: records.ACCOUNT, lt: records.META + '\xff', valueAsBuffer: false })) {
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

// After LevelDB's repair: keeps the files whose every chunk is present and right,
// removes the others, pending writes, damage notes and chunks of no kept version, and
// rewrites the accounting. `shard` is a Shard over the repaired database. Idempotent:
// a repair cut short by a crash is finished by running it again.
async function rebuild (shard, chunkSize) {
  const { db } = shard
  const kept = new Map() // key -> version
  const dropped = []
  let used = 0
  const metas = []
  for await (const entry of scan(db, { ...records.metaRange(), valueAsBuffer: false })) {
    const key = entry.key.slice(records.META.length)
    try {
      metas.push(records.decodeMeta(entry.value, shard.index, key))
    } catch {
      await db.batch([{ type: 'del', key: entry.key }])
      dropped.push({ key, problem: 'its metadata record is unreadable' })
    }
  }
  for (const meta of metas) {
    const problem = await checkFile(shard, meta.key, chunkSize)
    if (problem) {
      await db.batch([{ type: 'del', key: records.metaKey(meta.key) }])
      dropped.push({ key: meta.key, problem })
    } else {
      kept.set(meta.key, meta.version)
      used += meta.size
    }
  }
  const notes = []
  for await (const entry of scan(db, { ...records.damageRange(), valueAsBuffer: false })) notes.push(records.decodeNote(entry.value))
  // Chunks of no kept version and pending records go, in a keys-only pass. Chunks of a
  // version neither kept nor pending belong to a file whose metadata was lost: its key
  // is all that is left to report.
  const pending = new Set()
  for await (const entry of scan(db, { ...records.pendingRange(), values: false })) pending.add(entry.key.slice(records.PENDING.length))
  const reported = new Set(dropped.map((d) => d.key))
  let ops = []
  for await (const entry of scan(db, { gt: records.DAMAGE, values: false })) {
    // Dead-version notes stay: the space they name is still to be reclaimed.
    if (entry.key.startsWith(records.META) || entry.key.startsWith(records.DEAD)) continue
    const system = entry.key.startsWith('!')
    const [key, version] = entry.key.split(' ')
    const stray = system || kept.get(key) !== version
    if (stray && !system && !pending.has(version) && !reported.has(key)) {
      reported.add(key)
      dropped.push({ key, problem: 'its metadata was lost; some of its chunks were found' })
    }
    if (stray) ops.push({ type: 'del', key: entry.key })
    if (ops.length >= 1000) {
      await db.batch(ops)
      ops = []
    }
  }
  ops.push({ type: 'put', key: records.ACCOUNT, value: JSON.stringify({ used, files: kept.size }) })
  await db.batch(ops, { sync: true })
  return { files: kept.size, used, dropped, notes }
}

module.exports = { checkFile, checkAccounting, rebuild }

'use strict'

const { next, end } = require('./leveldb')
const { ChunkReader } = require('./chunk-reader')
const format = require('./format')

// A damaged file, as opposed to a failure of the check itself.
const isDamage = (err) => err.code === 'EINTEGRITY' || err.code === 'ECORRUPT'

// Reads one committed file whole (indexes, lengths, SHA-256). Resolves to undefined if
// it is sound or was removed meanwhile, else to what is wrong, in words.
async function checkFile (shard, key, chunkSize) {
  let reader
  try {
    reader = await ChunkReader.open({ shard, key, chunkSize })
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

// Compares the accounting record with the metadata, in one snapshot (the record, '!a',
// sorts just before the metadata records).
async function checkAccounting (shard) {
  const it = shard.db.iterator({ gte: format.ACCOUNT, lt: format.META + '\xff', valueAsBuffer: false })
  let account
  let used = 0
  let files = 0
  try {
    for (let entry = await next(it); entry; entry = await next(it)) {
      if (entry.key === format.ACCOUNT) account = JSON.parse(entry.value)
      else if (entry.key.startsWith(format.META)) {
        used += format.decodeMeta(entry.value, `shard ${shard.name}`).size
        files++
      }
    }
  } finally {
    await end(it)
  }
  if (!account) return 'its accounting record is missing'
  if (account.used !== used || account.files !== files) {
    return `its accounting says ${account.files} files of ${account.used} bytes, its metadata ${files} files of ${used} bytes`
  }
  return undefined
}

// After LevelDB's repair: keeps the files whose every chunk is present and right,
// removes the others, pending writes and chunks of no kept version, and rewrites the
// accounting. `shard` is a Shard over the repaired database.
async function rebuild (shard, chunkSize) {
  const kept = new Map() // key -> version
  const dropped = []
  let used = 0
  const unreadable = []
  const it = shard.db.iterator({ ...format.metaRange(), valueAsBuffer: false })
  const metas = []
  try {
    for (let entry = await next(it); entry; entry = await next(it)) {
      const key = entry.key.slice(format.META.length)
      try {
        metas.push({ key, ...format.decodeMeta(entry.value, `shard ${shard.name}`) })
      } catch {
        unreadable.push(key)
      }
    }
  } finally {
    await end(it)
  }
  for (const key of unreadable) {
    await shard.db.batch([{ type: 'del', key: format.metaKey(key) }])
    dropped.push({ key, problem: 'its metadata record is unreadable' })
  }
  for (const meta of metas) {
    const problem = await checkFile(shard, meta.key, chunkSize)
    if (problem) {
      await shard.db.batch([{ type: 'del', key: format.metaKey(meta.key) }])
      dropped.push({ key: meta.key, problem })
    } else {
      kept.set(meta.key, meta.version)
      used += meta.size
    }
  }
  // Chunks of no kept version and pending records go, in a keys-only pass. Chunks of a
  // version neither kept nor pending belong to a file whose metadata was lost: its key
  // is all that is left to report.
  const pending = new Set()
  const pendingScan = shard.db.iterator({ ...format.pendingRange(), values: false })
  try {
    for (let entry = await next(pendingScan); entry; entry = await next(pendingScan)) pending.add(entry.key.slice(format.PENDING.length))
  } finally {
    await end(pendingScan)
  }
  const reported = new Set(dropped.map((d) => d.key))
  const scan = shard.db.iterator({ gt: format.PENDING, values: false })
  let ops = []
  try {
    for (let entry = await next(scan); entry; entry = await next(scan)) {
      const [key, version] = entry.key.split(' ')
      const stray = entry.key.startsWith(format.PENDING) || kept.get(key) !== version
      if (stray && version !== undefined && !pending.has(version) && !reported.has(key)) {
        reported.add(key)
        dropped.push({ key, problem: 'its metadata was lost; some of its chunks were found' })
      }
      if (stray) ops.push({ type: 'del', key: entry.key })
      if (ops.length >= 1000) {
        await shard.db.batch(ops)
        ops = []
      }
    }
  } finally {
    await end(scan)
  }
  ops.push({ type: 'put', key: format.ACCOUNT, value: JSON.stringify({ used, files: kept.size }) })
  await shard.db.batch(ops, { sync: true })
  return { files: kept.size, used, dropped }
}

module.exports = { checkFile, checkAccounting, rebuild }

'use strict'

const records = require('./records')
const { removeFile } = require('./batches')

// Metadata gets kept in flight while a batch is made: the shard's commits wait behind its
// reads (it is made in the exclusive section), which overlap on LevelDB's threads rather
// than follow one another.
const READS = 16

// The batch of a collection (Shard#collectExpired): the files whose expiry record is due
// at `now`, up to `limit` records. { ops, gone (their metadata), more (records may be left) }.
async function expiredFiles (shard, now, limit) {
  const due = await entries(shard.db, { ...records.dueRange(now), limit, valueAsBuffer: false })
  const still = (meta, { value: version }) => meta.version === version && records.expired(meta, now)
  return { ...await removals(shard, due, (id) => records.parseExpiryKey(id).key, still), more: due.length === limit }
}

// The batch of an emptying (Shard#emptyTrash): the files trashed after `restoredAt` and
// before `before`, up to `limit` records. { ops, gone, more }.
async function trashedFiles (shard, restoredAt, before, limit) {
  const due = await entries(shard.db, { ...records.trashRange(restoredAt, before), limit, values: false })
  const still = (meta, { key: id }) => meta.trashed === records.parseTrashKey(id).trashed
  return { ...await removals(shard, due, (id) => records.parseTrashKey(id).key, still), more: due.length === limit }
}

// Each index record goes; the file it names too, where still(meta, entry) says the record
// is about the version there now (a record of a version replaced since goes alone).
async function removals (shard, due, keyOf, still) {
  const metas = await mapLimited(due, READS, ({ key: id }) => shard.getMeta(keyOf(id)))
  const ops = []
  const gone = []
  due.forEach((entry, i) => {
    ops.push({ type: 'del', key: entry.key })
    const meta = metas[i]
    if (!meta || !still(meta, entry)) return
    removeFile(ops, shard.chunkKeys, meta)
    gone.push(meta)
  })
  return { ops, gone }
}

async function entries (db, options) {
  const found = []
  for await (const entry of db.scan(options)) found.push(entry)
  return found
}

// fn(item) for every item, at most `limit` at a time; resolves to the results in order.
async function mapLimited (items, limit, fn) {
  const results = new Array(items.length)
  let next = 0
  const worker = async () => {
    while (next < items.length) {
      const i = next++
      results[i] = await fn(items[i])
    }
  }
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker))
  return results
}

module.exports = { expiredFiles, trashedFiles }

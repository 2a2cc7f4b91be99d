'use strict'

const records = require('./records')
const { madeNotDurable } = require('../leveldb/leveldb')
const chunkRecord = require('./chunk-record')
const { encodeHead, HEAD_FORMAT } = require('./head-record')

// Files given a head record per batch, and the data a batch moves into heads, at most
// (one file more may pass it): the batch does not wait for room in the memory budget
// (Shard#room may wait for the shard's own close, which waits for the upgrade).
const UPGRADE_PAGE = 16
const UPGRADE_BYTES = 2 * 1024 * 1024
const NO_BYTES = Buffer.alloc(0)

// Gives every file of format 2 in an open `shard` a head record (doc/format.md, "Format 1
// and 2 stores"): a file of one chunk moves its data into its head (the chunk's space is
// reclaimed as a removed version's, under a note of its own: records.movedKey), a larger
// one gets a head without data; then the shard is marked (records.HEADS) and later opens
// have nothing to do. Each page of files is one batch in the shard's exclusive section,
// so no commit or unlink of those files comes between; readers see the file whole
// before and after (a reader that misses the moved chunk finds the head: missingChunk).
// `room(bytes)` resolves to whether the disk has room for a batch besides the reserve;
// `write(ops)` writes a batch as the shard's writes go (synced in a synced shard);
// `died(meta)` notes a version's space as reclaimable. Stops when the shard closes, the
// disk has no room, or a write fails, to go on at the next open; never rejects. A file of
// format 1 (no chunk digests), or one whose records are damaged, is left as it is: reads
// of it go on through its metadata.
async function upgradeHeads (shard, { room, write, died }) {
  let after
  let ended = false // every file seen
  try {
    while (!ended) {
      if (!(await room(UPGRADE_BYTES + shard.chunkKeys.chunkSize))) return
      const going = await shard.exclusive(async () => {
        if (shard.status !== 'open') return false
        const page = await shard.metaPage(after, UPGRADE_PAGE)
        const ops = []
        const moved = []
        let bytes = 0
        let seen = 0
        for (const meta of page) {
          if (bytes >= UPGRADE_BYTES) break
          seen++
          after = meta.key
          const upgrade = meta.error || meta.format !== undefined ? undefined : await headFor(shard, meta)
          if (!upgrade) continue
          ops.push(...upgrade)
          if (meta.chunks === 1) {
            moved.push(meta)
            bytes += meta.size
          }
        }
        if (ops.length) {
          // A batch made but perhaps not durable is visible: its moved chunks are dead
          // space all the same, and the upgrade stops there.
          const failed = await write(ops).then(() => undefined, (err) => err)
          if (!failed || madeNotDurable(failed)) moved.forEach(died)
          if (failed) throw failed
        }
        ended = seen === page.length && page.length < UPGRADE_PAGE
        return true
      })
      if (!going) return
    }
    await shard.db.put(records.HEADS, '3', { sync: shard.sync })
    shard.allHeads = true
  } catch {
    // Left for the next open.
  }
}

// The batch that gives `meta`'s version (format 2) a head, or undefined where it cannot:
// a file of format 1, or one whose chunks disagree with its size, or whose chunk is
// missing or damaged.
async function headFor (shard, meta) {
  const { chunkKeys, db } = shard
  if (!meta.chunkDigest || meta.chunks !== Math.ceil(meta.size / chunkKeys.chunkSize)) return undefined
  if (meta.chunks > 1) return upgraded(meta, false)
  if (meta.chunks === 0) return upgraded(meta, true, NO_BYTES)
  const chunkKey = chunkKeys.key(meta.key, meta.version, 0)
  const record = await db.get(chunkKey)
  if (!chunkRecord.holds(chunkKey, record, meta.size)) return undefined
  return [...upgraded(meta, true, chunkRecord.payload(record)), { type: 'del', key: chunkKey }, { type: 'put', key: records.movedKey(meta.key, meta.version), value: String(meta.size) }]
}

function upgraded (meta, inline, data) {
  const now = { ...meta, format: HEAD_FORMAT, inline }
  return [
    { type: 'put', key: meta.key, value: encodeHead(meta.key, now, data) },
    { type: 'put', key: records.metaKey(meta.key), value: records.encodeMeta(now) }
  ]
}

module.exports = { upgradeHeads }

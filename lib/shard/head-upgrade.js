'use strict'

const records = require('./records')
const { madeNotDurable } = require('../leveldb/leveldb')
const chunkRecord = require('./chunk-record')
const { encodeHead, HEAD_FORMAT } = require('./head-record')

// Files per batch, and data a batch moves into heads, at most (one file more may pass it): a
// batch does not wait for the memory budget, which may wait for the shard's close.
const UPGRADE_PAGE = 16
const UPGRADE_BYTES = 2 * 1024 * 1024
const NO_BYTES = Buffer.alloc(0)

// Gives every file of format 2 in an open `shard` a head record (doc/format.md, "Format 1 and 2
// stores"), then marks the shard (records.HEADS). Each page is one batch in the shard's
// exclusive section, so no commit or unlink of its files comes between. `room(bytes)`: whether
// the disk has room for a batch besides the reserve; `died(meta)`: a version's space noted as
// dead. Stops when the shard closes, the disk has no room, or a write fails, to go on at the
// next open; never rejects.
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
          // A batch made but perhaps not durable is visible: its chunks are dead all the same.
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

// The batch that gives `meta`'s version (format 2) a head, or undefined: a file of format 1, or
// one whose chunks disagree with its size or are missing or damaged.
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

'use strict'

const { LevelDb, madeNotDurable } = require('../leveldb/leveldb')
const { openFailure } = require('../leveldb/classify')
const { shardName } = require('../base/shard-names')
const records = require('./records')
const scans = require('./scans')
const { deadBytes } = require('./dead-space')

// A shard opened alone, outside a store: nothing bounds its memtables but LevelDB.
const UNBOUNDED = { add () {}, closing () {}, async wait () {}, begin () {}, wrote () {} }

// Opens the existing shard at `location` as make(fields) (Shard.open): one LevelDB cannot open
// is damaged, never recreated. The log records LevelDB dropped are noted for verify();
// `unnoted`: those an earlier open could not note. `created`: made by this process just now,
// so it holds no dead versions, no keys, and its only log was empty.
async function openShard ({ index, location, readOnly, memtables = UNBOUNDED, unnoted = [], created = false, clock, ...rest }, make) {
  let db
  try {
    db = await LevelDb.open(location, { shard: index, readOnly })
  } catch (err) {
    throw openFailed(index, location, err)
  }
  let dropped = []
  try {
    // At once: each is a call on libuv's threads, and a store just opened opens many shards.
    const [raw, heads, dead, recovered, nextExpiry, trash] = await settled([
      db.get(records.ACCOUNT),
      created || db.get(records.HEADS),
      created ? 0 : deadBytes(db),
      created ? [] : db.droppedOnRecovery(),
      created ? undefined : scans.firstExpiry(db),
      created || !clock ? undefined : scans.trashFigures(db, clock.restoredAt)
    ])
    dropped = [...unnoted, ...recovered]
    if (raw === undefined) throw new Error('its accounting record is missing')
    const account = JSON.parse(raw)
    const unsaved = dropped.length ? await noteDamage(db, dropped) : []
    const shard = make({ ...rest, index, location, db, memtables, account, dead, created, allHeads: heads !== undefined, unsaved, nextExpiry, clock, trash })
    memtables.add(shard)
    return shard
  } catch (err) {
    await db.close().catch(() => {})
    const failure = err.code ? err : openFailed(index, location, err) // an OS error is not damage
    if (dropped.length) failure.dropped = dropped
    throw failure
  }
}

// Notes what LevelDB dropped with the keys of the writes in flight, which may have lost their
// commit, before their chunks are discarded. Resolves to the notes it could not write.
async function noteDamage (db, dropped) {
  const pending = [...new Set((await scans.pendingVersions(db)).map((p) => p.key))]
  const at = new Date()
  const note = { at: at.toISOString(), dropped, pending }
  if (db.readOnly) return [note]
  // Made, if perhaps not durably: noted again at the next open, it would be named twice.
  await db.put(records.damageKey(at.getTime()), JSON.stringify(note), { sync: true }).catch((err) => { if (!madeNotDurable(err)) throw err })
  return []
}

// The values of `promises` once all settled, or the first failure: none is left in flight when
// the database is closed on a failure.
async function settled (promises) {
  const results = await Promise.allSettled(promises)
  const failed = results.find((r) => r.status === 'rejected')
  if (failed) throw failed.reason
  return results.map((r) => r.value)
}

function openFailed (index, location, err) {
  const name = `shard ${shardName(index)}`
  return openFailure(err, { dir: location, what: name, damaged: name, hint: `kfs repair ${index} may recover it`, props: { shard: index } })
}

module.exports = { openShard }

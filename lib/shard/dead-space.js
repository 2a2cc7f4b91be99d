'use strict'

const records = require('./records')
const scans = require('./scans')
const { planReclaim } = require('./reclaim-plan')

// A range is compacted once its removed versions are at least this share of its tables' bytes:
// compacting rewrites the live data in the range too, up to 3 bytes per byte given back.
const RECLAIM_SHARE = 0.25

// The space of a shard's removed versions that LevelDB keeps until a compaction passes over
// it; a shard sees too few writes for its own compactions to come soon. Every removal leaves a
// dead note (records.deadKey) until the Reclaimer or compact() compacted its range.
class DeadSpace {
  #shard
  #waiting = new Set() // the ids of the notes the last plan left for later
  #forgets = 0 // forget() calls so far: a plan that scanned before one defers nothing

  constructor (shard, bytes) {
    this.#shard = shard
    this.bytes = bytes // of removed versions whose space no compaction has reclaimed yet
    this.deferred = 0 // of which the notes the last plan left for later (RECLAIM_SHARE)
    this.compacting = 0 // compactions of the shard's key ranges in flight
  }

  // A removal's bytes are reclaimable at once, and what the last plan left stays deferred: a
  // shard whose ranges stay below RECLAIM_SHARE is not planned again for every removal.
  died (size) {
    if (size === 0) return
    this.bytes += size
    this.#shard.onDead(this.#shard)
  }

  get reclaimable () {
    return this.bytes - this.deferred
  }

  // { pieces: [{ from, to, tables }], ids, bytes }: the key ranges to compact (reclaim-plan.js)
  // whose dead versions are at least RECLAIM_SHARE of their tables' bytes, and those versions'
  // notes, which forget() then removes; the others are deferred. A crash before leaves them.
  async plan () {
    const { db, chunkKeys } = this.#shard
    const forgets = this.#forgets
    const dead = await scans.deadVersions(db)
    const pieces = []
    const skipped = new Set()
    const shardBytes = await db.approximateSize(records.WHOLE.from, records.WHOLE.to) + db.memoryUsage()
    for (const piece of planReclaim(dead, chunkKeys, shardBytes)) {
      piece.tables ??= await db.approximateSize(piece.from, piece.to)
      if (piece.bytes >= RECLAIM_SHARE * piece.tables) pieces.push(piece)
      else piece.ids.forEach((id) => skipped.add(id))
    }
    const ids = new Set(pieces.flatMap((piece) => piece.ids).filter((id) => !skipped.has(id)))
    const bytes = dead.reduce((sum, d) => sum + (ids.has(d.id) ? d.bytes : 0), 0)
    // Notes forgotten since the scan (compact()) make it stale: nothing is deferred.
    const stale = forgets !== this.#forgets
    this.#leave(dead, (id) => !stale && !ids.has(id))
    return { pieces: pieces.map(({ from, to, tables }) => ({ from, to, tables })), ids: [...ids], bytes }
  }

  // Deletes dead notes (`ops`), then sums the notes left: the Reclaimer and compact() may forget
  // the same notes at once while removals note new ones, and subtracting would count twice.
  // Exclusive of commits and unlinks, which note removals and add to `bytes` in one section.
  forget (ops) {
    return this.#shard.exclusive(async () => {
      if (ops.length) await this.#shard.db.batch(ops)
      this.#forgets++
      const left = await scans.deadVersions(this.#shard.db)
      this.bytes = left.reduce((sum, d) => sum + d.bytes, 0)
      this.#leave(left, (id) => this.#waiting.has(id))
    })
  }

  async compactRange (from, to) {
    this.compacting++
    try {
      await this.#shard.db.compactRange(from, to)
    } finally {
      this.compacting--
    }
  }

  // Of the dead notes scanned, those whose id `waits` are left for later.
  #leave (notes, waits) {
    this.#waiting = new Set(notes.filter((d) => waits(d.id)).map((d) => d.id))
    this.deferred = notes.reduce((sum, d) => sum + (this.#waiting.has(d.id) ? d.bytes : 0), 0)
  }
}

async function deadBytes (db) {
  return (await scans.deadVersions(db)).reduce((sum, d) => sum + d.bytes, 0)
}

module.exports = { DeadSpace, deadBytes }

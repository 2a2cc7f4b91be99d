'use strict'

const fs = require('node:fs')
const { mapLimit } = require('async')
const { LevelDb } = require('../leveldb/leveldb')
const { Shard } = require('../shard/shard')
const { shardName } = require('../shard/routing')
const { checkFile, checkAccounting, rebuild } = require('./file-check')
const args = require('../api/args')
const errors = require('../api/errors')

// Store-wide maintenance over the shards of an open store: verify, repair, compact.
// `ctx` is { shards, chunkSize, shardCount, op }: `op(fn)` runs fn as an operation the
// store's close() waits for.

// Files verify() checks at once: LevelDB reads on libuv's threads while this thread
// hashes, which pays off for many small files.
const VERIFY_CONCURRENCY = 4
// verify() reads and compact() frees space: both may give up the disk reserve.
const MAY_SPEND_RESERVE = { useReserve: true }

// Reads every committed file whole and checks each shard's accounting and damage
// notes. Resolves to { files, bytes, problems: [{ shard, key, kind, problem }] }, key
// null for a problem of a whole shard. Holds a shard only while checking files, a few
// at a time; memory stays at a page of metadata and those files' read-ahead.
async function verify (ctx, { shard, onProgress }) {
  const { shards } = ctx
  if (shard !== undefined) args.shardIndex(shard, ctx.shardCount)
  const report = { files: 0, bytes: 0, problems: [] }
  const problem = (index, key, kind, text) => report.problems.push({ shard: index, key, kind, problem: text })
  for (const index of shards.indices().filter((i) => shard === undefined || i === shard)) {
    try {
      for (const note of await ctx.op(() => shards.inShard(index, (s) => s.damageNotes(), MAY_SPEND_RESERVE))) {
        problem(index, null, 'log', `when it was opened at ${note.at}, LevelDB dropped damaged records from its log (${note.dropped.join('; ')}): ` +
          `the writes made just before may be lost${note.pending.length ? '' : '; no write was in flight'}. kfs repair ${index} clears this note`)
        for (const key of note.pending) problem(index, key, 'write', `a write of it was in flight when its shard's log was damaged (${note.at}): that write, or the version it replaced, may be lost`)
      }
      for await (const page of shards.metaPages(index, ctx.op)) {
        const damages = await mapLimit(page, VERIFY_CONCURRENCY, async (meta) => {
          if (meta.error) return undefined
          const damage = await ctx.op(() => shards.inShard(index, (s) => checkFile(s, meta.key, ctx.chunkSize), MAY_SPEND_RESERVE))
          report.files++
          report.bytes += meta.size
          if (onProgress) onProgress({ shard: index, files: report.files, bytes: report.bytes })
          return damage
        })
        page.forEach((meta, i) => {
          if (meta.error) problem(index, meta.key, 'metadata', meta.error.message)
          else if (damages[i]) problem(index, meta.key, 'file', damages[i])
        })
      }
      const accounting = await ctx.op(() => shards.inShard(index, checkAccounting, MAY_SPEND_RESERVE))
      if (accounting) problem(index, null, 'accounting', accounting)
    } catch (err) {
      // Whatever keeps a shard from being checked (damage, EBUSY, EMFILE, EIO, ENOSPC,
      // EACCES) is a problem to report; the other shards are still checked.
      if (err.code === 'ECLOSED') throw err
      problem(index, null, 'shard', err.message)
    }
  }
  return report
}

// Runs LevelDB's repair on one shard, then keeps only the files that are whole and
// rebuilds the shard's accounting. The shard is held exclusively meanwhile (EBUSY for
// everything else that wants it); other shards keep serving. A crash midway leaves a
// mark that makes the shard ECORRUPT until repair is run again, which finishes it.
async function repair (ctx, index) {
  const { shards } = ctx
  args.shardIndex(index, ctx.shardCount)
  const location = shards.locationOf(index)
  const lost = !fs.existsSync(location)
  if (lost && !shards.has(index)) throw errors.noShard(index)
  const before = shards.knownFiles(index)
  await shards.hold(index, 'is being repaired')
  try {
    await shards.usage.repairing(index)
    // Nothing is left to repair from a shard whose directory is gone: an empty shard
    // lets its keys be written again.
    if (lost) await Shard.create(location, shards.tmpDir)
    else await LevelDb.repair(location, index)
    const db = await LevelDb.open(location, { shard: index }).catch((err) => {
      throw errors.corrupt(`shard ${shardName(index)}`, `LevelDB's repair could not make it readable: ${err.message}`, { shard: index, cause: err })
    })
    let result
    try {
      const repaired = new Shard({ index, location, db, cap: shards.cap, chunkKeys: shards.chunkKeys, sync: true, account: { used: 0, files: 0 } })
      result = await rebuild(repaired, ctx.chunkSize)
    } finally {
      await db.close()
    }
    await shards.usage.repaired(index, { used: result.used, files: result.files, diskBytes: 0 })
    shards.markCleaned(index)
    // Files that left no trace at all can only be counted, from the last known total.
    const unaccounted = Math.max(0, (before ?? 0) - result.files - result.dropped.length)
    return { shard: index, ...result, unaccounted, recreated: lost }
  } finally {
    shards.unhold(index)
  }
}

// Compacts every shard, which drops abandoned writes and reclaims the space of removed
// data. Shards with the most dead space go first: on a full disk, compacting them frees
// the room that compacting the others needs. A shard that fails (damaged, or an OS
// error such as ENOSPC) is skipped and named at the end.
async function compact (ctx) {
  const { shards } = ctx
  const order = []
  for (const index of shards.indices()) {
    const figures = await shards.figures(index).catch(() => ({ used: 0, diskBytes: 0 }))
    order.push({ index, dead: figures.diskBytes - figures.used })
  }
  order.sort((a, b) => b.dead - a.dead || a.index - b.index)
  const failed = []
  for (const { index } of order) {
    try {
      await ctx.op(() => shards.inShard(index, (shard) => shard.compact(), MAY_SPEND_RESERVE))
    } catch (err) {
      if (err.code === 'ECLOSED') throw err
      failed.push({ shard: index, error: err })
    }
  }
  if (failed.length) throw someFailed(failed, 'compacted', order.length > failed.length)
}

// One error for the shards an operation could not do, once it did the others:
// `failed` is [{ shard, error }]. ECORRUPT if every failure was damage, otherwise the
// code of the first that was not (EMFILE, EIO, ENOSPC, EBUSY...), which is not cured by
// a repair. err.shards names the shards, err.errors holds each failure.
function someFailed (failed, done, others) {
  const shards = [...new Set(failed.map((f) => f.shard))]
  const what = `shard${shards.length > 1 ? 's' : ''} ${shards.map(shardName).join(', ')}`
  const reasons = failed.map(({ error }) => (error.cause && error.cause.message ? error.cause.message : error.message)).join('; ')
  const rest = others ? `; the other shards were ${done}` : ''
  const notDamage = failed.find(({ error }) => !errors.isCorrupt(error))
  const props = { shard: shards[0], shards, errors: failed.map((f) => f.error), cause: (notDamage || failed[0]).error }
  if (!notDamage) return errors.corrupt(what, reasons + rest, props)
  return errors.system(`${what} could not be ${done}`, { code: notDamage.error.code, message: reasons + rest }, props)
}

module.exports = { verify, repair, compact, someFailed }

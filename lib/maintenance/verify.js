'use strict'

const { checkFile, checkAccounting, headsWithoutMeta, unindexed, unindexedTrash } = require('./file-check')
const args = require('../api/args')
const { expired } = require('../shard/records')

// Files checked at once: LevelDB reads on libuv's threads while this thread hashes.
const VERIFY_CONCURRENCY = 4
// verify() reads: it may give up the disk reserve.
const MAY_SPEND_RESERVE = { useReserve: true }

// Loaded by the first verify(), out of the heap of a store that never verifies
// (doc/performance.md, "Format 3: a piece is one get").
const mapLimit = () => require('async').mapLimit

// Reads every committed file of an open store (`ctx`: { shards, chunkSize, shardCount })
// and checks each shard's accounting and damage notes. Resolves to { files, bytes,
// problems: [{ shard, key (null for a whole shard), kind, problem }] }. A file expired at
// the time verify starts is neither checked nor counted: it is gone to every reader. Holds
// a shard only while checking a few files; memory stays at a page of metadata and their
// read-ahead.
async function verify (ctx, { shard, onProgress }) {
  const { shards } = ctx
  const now = Date.now()
  if (shard !== undefined) args.shardIndex(shard, ctx.shardCount)
  const report = { files: 0, bytes: 0, problems: [] }
  const problem = (index, key, kind, text) => report.problems.push({ shard: index, key, kind, problem: text })
  // What onProgress throws is no damage: the files in check finish, and verify rejects
  // with it as thrown.
  let stopped
  const progress = (figures) => {
    if (!onProgress || stopped) return
    try {
      onProgress(figures)
    } catch (err) {
      stopped = { err }
    }
  }
  for (const index of shards.indices().filter((i) => shard === undefined || i === shard)) {
    try {
      for (const note of await shards.inShard(index, (s) => s.damageNotes(), MAY_SPEND_RESERVE)) {
        problem(index, null, 'log', `when it was opened at ${note.at}, LevelDB dropped damaged records from its log (${note.dropped.join('; ')}): ` +
          `the writes made just before may be lost${note.pending.length ? '' : '; no write was in flight'}. kfs repair ${index} clears this note`)
        for (const key of note.pending) problem(index, key, 'write', `a write of it was in flight when its shard's log was damaged (${note.at}): that write, or the version it replaced, may be lost`)
      }
      for await (const page of shards.metaPages(index)) {
        const damages = await mapLimit()(page, VERIFY_CONCURRENCY, async (meta) => {
          if (meta.error || stopped || expired(meta, now)) return undefined
          const damage = await shards.inShard(index, (s) => checkFile(s, meta.key, ctx.chunkSize), MAY_SPEND_RESERVE)
          report.files++
          report.bytes += meta.size
          progress({ shard: index, files: report.files, bytes: report.bytes })
          return damage
        })
        page.forEach((meta, i) => {
          if (meta.error) problem(index, meta.key, 'metadata', meta.error.message)
          else if (damages[i]) problem(index, meta.key, 'file', damages[i])
        })
        if (stopped) throw stopped.err
      }
      for (const key of await shards.inShard(index, headsWithoutMeta, MAY_SPEND_RESERVE)) {
        problem(index, key, 'file', `its head record has no metadata record: a read finds the file, a listing, stat and the accounting do not. kfs repair ${index} makes its metadata again from it, or unlink removes it`)
      }
      for (const key of await shards.inShard(index, unindexed, MAY_SPEND_RESERVE)) {
        problem(index, key, 'expiry', `its expiry record is missing: it would never be removed when it expires. kfs repair ${index} makes the record again`)
      }
      for (const key of await shards.inShard(index, unindexedTrash, MAY_SPEND_RESERVE)) {
        problem(index, key, 'trash', `its trash record is missing: restoreTrash would not count it, nor emptyTrash remove it. kfs repair ${index} makes the record again`)
      }
      const accounting = await shards.inShard(index, checkAccounting, MAY_SPEND_RESERVE)
      if (accounting) problem(index, null, 'accounting', accounting)
    } catch (err) {
      if (stopped) throw stopped.err
      // Whatever keeps a shard from being checked (damage, EBUSY, EMFILE, EIO, ENOSPC,
      // EACCES) is a problem to report; the other shards are still checked.
      if (err.code === 'ECLOSED') throw err
      problem(index, null, 'shard', err.message)
    }
  }
  return report
}

module.exports = { verify }

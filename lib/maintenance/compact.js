'use strict'

const errors = require('../api/errors')

// Compacts every shard, which drops abandoned writes and reclaims the space of removed
// data. Shards with the most dead space go first: on a full disk, compacting them frees
// the room that compacting the others needs. A shard that fails (damaged, or an OS
// error such as ENOSPC) is skipped and named at the end. `shards`: the open store's.
async function compact (shards) {
  const order = []
  for (const index of shards.indices()) {
    const figures = await shards.figures(index).catch(() => ({ used: 0, diskBytes: 0 }))
    order.push({ index, dead: figures.diskBytes - figures.used })
  }
  order.sort((a, b) => b.dead - a.dead || a.index - b.index)
  const failed = []
  for (const { index } of order) {
    try {
      await shards.inShard(index, (shard) => shard.compact(), { useReserve: true }) // frees space: may give up the reserve
    } catch (err) {
      if (err.code === 'ECLOSED') throw err
      failed.push({ shard: index, error: err })
    }
  }
  if (failed.length) throw errors.shardsFailed(failed, 'compacted', order.length > failed.length)
}

module.exports = { compact }

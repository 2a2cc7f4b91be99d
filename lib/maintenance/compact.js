'use strict'

const errors = require('../api/errors')

// Compacts every shard, dropping abandoned writes and reclaiming removed data's space.
// Most dead space first: on a full disk, that frees the room the others need. A shard
// that fails is skipped and named at the end.
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

'use strict'

const { gone } = require('../shard/records')
const errors = require('../api/errors')

// Shards whose first page of metadata list() fetches ahead of the one it yields from.
const LIST_AHEAD = 16

// Yields { key, size, name } of every committed file (of shard `only`, if given), shard
// by shard, a page of metadata at a time, holding no shard between pages. A shard or
// record that fails does not stop the listing: one error at the end names them.
// `admitted`: a listing the holder serves (args.SERVED), which ends while the store closes.
// A file expired when the listing began, or in the trash, is left out.
async function * list (shards, only, operations, { admitted = false } = {}) {
  const now = Date.now()
  const failed = [] // { shard, error }
  const indices = shards.indices().filter((i) => only === undefined || i === only)
  // The next shards' first pages are fetched ahead, so that their opening (a few
  // milliseconds each) overlaps; once fetched, they hold no shard.
  const ahead = new Map()
  const fetchAhead = (n) => {
    if (n >= indices.length || ahead.has(n)) return
    const page = shards.metaPage(indices[n], undefined, { admitted })
    page.catch(() => {}) // met when its turn comes
    ahead.set(n, page)
  }
  for (const [n, index] of indices.entries()) {
    for (let m = n; m < n + LIST_AHEAD; m++) fetchAhead(m)
    const first = ahead.get(n)
    ahead.delete(n)
    try {
      for await (const page of shards.metaPages(index, first, { admitted })) {
        if (operations.closed && !admitted) throw errors.closed() // a page fetched ahead is not handed out after close()
        for (const meta of page) {
          if (meta.error) {
            failed.push({ shard: index, error: meta.error })
            continue
          }
          if (gone(meta, now, shards.clock.restoredAt)) continue
          const entry = { key: meta.key, size: meta.size }
          if (meta.name !== undefined) entry.name = meta.name
          yield entry
        }
      }
    } catch (err) {
      if (err.code === 'ECLOSED') throw err
      failed.push({ shard: index, error: err })
    }
  }
  const others = indices.some((index) => !failed.some((f) => f.shard === index))
  if (failed.length) throw errors.shardsFailed(failed, 'listed', others)
}

module.exports = { list }

'use strict'

// Shards opened, or made, ahead of need at a time: an open is a few calls on libuv's 4 threads,
// which the store's gets share.
const AHEAD = 2
const NO_DESCRIPTORS = new Set(['EMFILE', 'ENFILE'])

// Opens (or makes) the shards `indices` in order, AHEAD at a time, through the pool's
// openAhead(), so that a store's first calls find their shards open and made. Stops when the
// pool is closing, has no free slot or a caller waits for one (pool.full), and once the process
// is out of descriptors; a shard mayMake(index) refuses is left to a write's need.
// Each round begins from an unref'd timer (an immediate would run before the event loop checks
// whether anything keeps it alive): a process with nothing else to do exits. A shard that fails
// is left as it was, for the next call on it to report. Never rejects.
async function openAhead (indices, { pool, mayMake }) {
  const waiting = [...indices]
  let stop = false
  const open = (index) => {
    if (!mayMake(index)) return
    return pool.openAhead(index, { ahead: true }).catch((err) => {
      if (NO_DESCRIPTORS.has(err.code)) stop = true
    })
  }
  while (!stop && waiting.length > 0) {
    await new Promise((resolve) => setTimeout(resolve, 0).unref())
    if (pool.full) return
    await Promise.all(waiting.splice(0, AHEAD).map(open))
  }
}

module.exports = { openAhead }

'use strict'

// Shards opened, or made, ahead of need at a time. An open is a few calls on libuv's 4
// threads, which the store's gets share: two leave them two.
const AHEAD = 2
// Failures that stop opening ahead: no descriptor is left for another shard.
const NO_DESCRIPTORS = new Set(['EMFILE', 'ENFILE'])

// Opens (or makes) the shards `indices`, in order, AHEAD at a time, through the pool's
// openAhead(), so that a store's first calls find their shards open and its first writes
// find them made (a shard's making and open cost its first write 5 to 30 ms otherwise).
// A call that needs a shard not open or not made yet opens or makes it at once, beside
// these. Stops when the pool is closing, has no free slot or a caller waits for one (it
// never closes a shard for this), and once the process is out of descriptors; a shard
// that mayMake(index) refuses (not made, and the disk reserve given up) is left to a
// write's need. Each round begins from an unref'd timer once the last ended (an
// immediate would run before the event loop checks whether anything keeps it alive): a
// process with nothing else to do exits then. A shard that fails to open or to be made
// is left closed, or unmade: the next call on it tries again and reports the failure,
// as it would have without this. Resolves once done; never rejects.
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

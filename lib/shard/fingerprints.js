'use strict'

// A shard of at most this many files keeps their keys' fingerprints, 4 bytes each.
const MAX_PRINTED = 8192
const FIRST_ROOM = 16 // fingerprints an empty table has room for; it doubles as keys come

// How many of a shard's keys share each fingerprint (a key's first 28 bits). A commit of a key
// whose fingerprint is absent creates a file, and skips reading its metadata: a trip to
// LevelDB's thread, most of a small file's time. Made by the first commit, given up past
// MAX_PRINTED files or if a metadata record cannot be read (commits then read metadata).
// A sorted Uint32Array: outside V8's heap, nothing for the collector to trace, where a Map
// would take about 30 bytes a file in it (doc/performance.md, "Format 3: a piece is one get").
class Fingerprints {
  #prints // a SortedPrints, or undefined: not made, or given up
  #made = false

  // Whether the shard may hold `key`; `files`: how many it holds, keys(): them, async.
  async mayHold (key, files, keys) {
    if (!this.#made && files <= MAX_PRINTED) {
      this.#made = true
      this.#prints = await collect(keys())
    }
    return !this.#prints || this.#prints.has(fingerprint(key))
  }

  // Whether fingerprints made already say the shard does not hold `key`; asked before mayHold().
  lacks (key) {
    return this.#prints !== undefined && !this.#prints.has(fingerprint(key))
  }

  made () {
    this.#made = true
    this.#prints = new SortedPrints()
  }

  // `files`: how many the shard holds now.
  added (key, files) {
    this.#change(key, 1, files)
  }

  removed (key, files) {
    this.#change(key, -1, files)
  }

  #change (key, by, files) {
    if (!this.#prints) return
    if (files > MAX_PRINTED) {
      this.#prints = undefined
      return
    }
    if (by > 0) this.#prints.add(fingerprint(key))
    else this.#prints.remove(fingerprint(key))
  }
}

// A multiset of fingerprints: a sorted Uint32Array, `length` of it used, its room a power of
// two, doubled when full.
class SortedPrints {
  constructor (prints = new Uint32Array(FIRST_ROOM), length = 0) {
    this.prints = prints
    this.length = length
  }

  has (print) {
    const at = this.#find(print)
    return at < this.length && this.prints[at] === print
  }

  add (print) {
    if (this.length === this.prints.length) {
      const more = new Uint32Array(this.prints.length * 2)
      more.set(this.prints)
      this.prints = more
    }
    const at = this.#find(print)
    this.prints.copyWithin(at + 1, at, this.length)
    this.prints[at] = print
    this.length++
  }

  remove (print) {
    const at = this.#find(print)
    if (at === this.length || this.prints[at] !== print) return
    this.prints.copyWithin(at, at + 1, this.length)
    this.length--
  }

  #find (print) {
    let low = 0
    let high = this.length
    while (low < high) {
      const mid = (low + high) >>> 1
      if (this.prints[mid] < print) low = mid + 1
      else high = mid
    }
    return low
  }
}

// The SortedPrints of `keys`, or undefined if reading them failed.
async function collect (keys) {
  const found = []
  try {
    for await (const key of keys) found.push(fingerprint(key))
  } catch {
    return undefined
  }
  let room = FIRST_ROOM
  while (room < found.length) room *= 2
  const prints = new Uint32Array(room)
  prints.set(found)
  prints.subarray(0, found.length).sort()
  return new SortedPrints(prints, found.length)
}

// Keys are hex (api/keys.js). One that is not (a damaged record) counts as 0: a fingerprint
// too many costs only a read.
function fingerprint (key) {
  return parseInt(key.slice(0, 7), 16) >>> 0
}

module.exports = { Fingerprints }

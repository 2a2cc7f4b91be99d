'use strict'

// A shard holding at most this many files keeps their keys' fingerprints in memory:
// 4 bytes each, outside V8's heap (below).
const MAX_PRINTED = 8192
// Fingerprints a shard's table has room for when it is made empty (it doubles as
// keys come).
const FIRST_ROOM = 16

// How many of a shard's keys share each fingerprint (a key's first 28 bits). A commit
// of a key whose fingerprint is absent is known to create a file, and skips reading
// its metadata: a trip to LevelDB's thread, which is most of a small file's time. Made
// by the first commit (a shard opened to be read or listed has no use for it), and
// given up past MAX_PRINTED files or if a metadata record cannot be read (verify()
// reports that; commits then read metadata as before).
//
// The fingerprints are a sorted Uint32Array, each once per key that has it: its memory
// is outside the JavaScript heap and holds nothing for the garbage collector to trace
// (a Map would take about 30 bytes a file in the heap). The heap's size decides how
// often V8 collects it whole while reads hand out Buffers (doc/performance.md, "Format
// 3: a piece is one get").
class Fingerprints {
  #prints // a SortedPrints, or undefined: not made, or given up
  #made = false

  // Whether the shard may hold `key`; `files` is how many it holds, keys() an async
  // iterable of the keys it holds.
  async mayHold (key, files, keys) {
    if (!this.#made && files <= MAX_PRINTED) {
      this.#made = true
      this.#prints = await collect(keys())
    }
    return !this.#prints || this.#prints.has(fingerprint(key))
  }

  // Whether the shard is known not to hold `key`, from fingerprints made already: a
  // commit asks this first, and mayHold() only when it is false.
  lacks (key) {
    return this.#prints !== undefined && !this.#prints.has(fingerprint(key))
  }

  // The shard was just created: it holds no key.
  made () {
    this.#made = true
    this.#prints = new SortedPrints()
  }

  // After a commit created a file, or an unlink removed one; `files`: the count now.
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

// A multiset of fingerprints: a sorted Uint32Array, `length` of it used, a fingerprint
// there once per key that has it. Its room is a power of two, doubled when full: at
// most MAX_PRINTED fingerprints, 32 KiB.
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

  // The first index whose fingerprint is not below `print` (length if none).
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

// The fingerprints of `keys` (an async iterable), or undefined if reading them failed.
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

// Keys are hex (api/keys.js): their first 7 digits make a 28-bit integer. A stored key
// that is not (a damaged record) counts as 0: a fingerprint too many only costs a read.
function fingerprint (key) {
  return parseInt(key.slice(0, 7), 16) >>> 0
}

module.exports = { Fingerprints }

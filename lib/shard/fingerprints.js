'use strict'

// A shard holding at most this many files keeps their keys' fingerprints in memory
// (about 30 bytes each, doc/performance.md).
const MAX_PRINTED = 8192

// How many of a shard's keys share each fingerprint (a key's first 28 bits). A commit
// of a key whose fingerprint is absent is known to create a file, and skips reading
// its metadata: a trip to LevelDB's thread, which is most of a small file's time. Made
// by the first commit (a shard opened to be read or listed has no use for it), and
// given up past MAX_PRINTED files or if a metadata record cannot be read (verify()
// reports that; commits then read metadata as before).
class Fingerprints {
  #prints // fingerprint -> count, or undefined: not made, or given up
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
    this.#prints = new Map()
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
    const print = fingerprint(key)
    const count = (this.#prints.get(print) || 0) + by
    if (count > 0) this.#prints.set(print, count)
    else this.#prints.delete(print)
  }
}

async function collect (keys) {
  const prints = new Map()
  try {
    for await (const key of keys) {
      const print = fingerprint(key)
      prints.set(print, (prints.get(print) || 0) + 1)
    }
  } catch {
    return undefined
  }
  return prints
}

// Keys are hex: their first 7 digits make a small integer (V8 keeps it unboxed).
function fingerprint (key) {
  return parseInt(key.slice(0, 7), 16)
}

module.exports = { Fingerprints }

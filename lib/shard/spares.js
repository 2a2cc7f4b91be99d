'use strict'

const fs = require('node:fs/promises')
const { writeFromTemplate } = require('./template')

// How many new shards are made ahead at most: one is made when one is taken, so a
// store that makes shards one after another finds one ready.
const SPARES = 4

// New shards made ahead in the store's tmp directory from the template, complete and
// synced, so that making a shard is a rename (create.js). Nothing is made ahead before
// this process has made a shard: a store that makes none gets none, and one that makes
// some gets no more shards than it uses, as spares are never put in place. Those left
// at close are removed, and a crash leaves them in tmp, which every open empties. A
// spare that fails to be made (a full disk) is forgotten; the shard that needs one then
// makes its own and reports the failure.
class Spares {
  #tmpDir
  #mayFill // () => whether spares may be made now (not on a full disk)
  #ready = [] // paths of spares made and synced
  #making // promise of the spare being made
  #generation = 0 // spares made before clear() are removed
  #closed = false
  #wanted = SPARES // spares that can still be used

  constructor (tmpDir, mayFill = () => true) {
    this.#tmpDir = tmpDir
    this.#mayFill = mayFill
  }

  // The path of a spare, now its caller's to rename or remove, or undefined; then
  // makes spares up to SPARES, and no more than `wanted`: the shards the store has
  // still to make besides this one (a store makes each shard once).
  take (template, wanted = SPARES) {
    const spare = this.#ready.shift()
    this.#wanted = wanted
    this.#fill(template)
    return spare
  }

  // One spare at a time, syncing one file at a time: libuv's threads serve LevelDB
  // too, and the shard being opened waits for them. A spare made after clear() began is
  // removed, and no more are made until the next take().
  #fill (template) {
    if (this.#closed || this.#making || this.#ready.length >= Math.min(SPARES, this.#wanted) || !this.#mayFill()) return
    const generation = this.#generation
    const kept = () => !this.#closed && generation === this.#generation
    this.#making = writeFromTemplate(template, this.#tmpDir, 'spare', { serial: true }).then(async (dir) => {
      if (kept()) return this.#ready.push(dir)
      await fs.rm(dir, { recursive: true, force: true })
    }).then(() => {
      this.#making = undefined
      if (kept()) this.#fill(template)
    }, () => {
      this.#making = undefined // the next shard made without a spare reports the cause
    })
  }

  // Removes every spare, the one being made too: on a full disk their space is needed.
  async clear () {
    this.#generation++
    const left = this.#ready.splice(0)
    await Promise.all([this.#making, ...left.map((dir) => fs.rm(dir, { recursive: true, force: true }).catch(() => {}))])
  }

  // Makes no more spares, and removes those made.
  close () {
    this.#closed = true
    return this.clear()
  }
}

module.exports = { Spares, SPARES }

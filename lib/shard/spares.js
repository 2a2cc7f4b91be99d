'use strict'

const fs = require('node:fs/promises')
const { writeFromTemplate } = require('./template')

const SPARES = 4 // new shards made ahead, at most

// New shards made ahead in the store's tmp directory from the template, whole and synced, so
// that making a shard is a rename (create.js): one is made when one is taken. close() removes
// them, and every open empties tmp. A spare that fails to be made (a full disk) is forgotten.
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

  // The path of a spare, now the caller's to rename or remove, or undefined; then makes spares
  // up to SPARES and `wanted`, the shards the store has still to make besides this one.
  take (template, wanted = SPARES) {
    const spare = this.#ready.shift()
    this.#wanted = wanted
    this.#fill(template)
    return spare
  }

  // One spare at a time, one sync at a time: libuv's threads serve LevelDB too. A spare made
  // after clear() began is removed, and no more are made until the next take().
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

  close () {
    this.#closed = true
    return this.clear()
  }
}

module.exports = { Spares, SPARES }

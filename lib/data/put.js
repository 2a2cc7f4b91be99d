'use strict'

const fs = require('node:fs')
const { sha256Of } = require('../api/keys')
const { spool, remove } = require('./spool')
const { OFFLOAD_DIGEST_BYTES } = require('./digester')
const errors = require('../api/errors')
const { trashed } = require('../shard/records')

// Content addressing: put() stores data under the SHA-256 of its content, and content
// already stored (same hash and size) with the expiry asked is not written again. With
// another expiry it is, as writeFile would: the put's expiry replaces it.
class Puts {
  #files
  #digester
  #tmpDir
  #cap
  #putting = new Map() // sha256 -> the turn of the last put() of that content
  #spools = new Set() // AbortControllers of input being spooled
  #stopped = false

  // tmpDir, cap: where input is spooled and the most it may hold.
  constructor ({ files, digester, tmpDir, cap }) {
    this.#files = files
    this.#digester = digester
    this.#tmpDir = tmpDir
    this.#cap = cap
  }

  async put (buffer, { expires, sync } = {}) {
    const sha256 = buffer.length >= OFFLOAD_DIGEST_BYTES ? await this.#digester.digestOf(buffer) : sha256Of(buffer)
    await this.#unlessHeld(sha256, buffer.length, { expires, sync }, () => this.#files.write({ key: sha256 }, [buffer], { size: buffer.length, sha256, expires, sync }))
    return sha256
  }

  // The key is known only once the input is hashed: it is spooled to tmp/ meanwhile.
  async putStream (readable, { expires, sync } = {}) {
    const controller = new AbortController()
    this.#spools.add(controller)
    if (this.#stopped) controller.abort()
    let spooled
    try {
      spooled = await spool(readable, { tmpDir: this.#tmpDir, cap: this.#cap, signal: controller.signal }).catch((err) => {
        throw this.#stopped ? errors.closed() : err
      })
      const { file, size, sha256 } = spooled
      await this.#unlessHeld(sha256, size, { expires, sync }, async () => {
        const input = fs.createReadStream(file, { highWaterMark: this.#files.chunkSize })
        try {
          await this.#files.write({ key: sha256 }, input, { size, sha256, expires, sync })
        } finally {
          input.destroy() // also when the write failed before reading it
        }
      })
      return sha256
    } finally {
      this.#spools.delete(controller)
      if (spooled) await remove(spooled.file)
    }
  }

  // The store is closing: input being spooled, and any from now on, is abandoned.
  stop () {
    this.#stopped = true
    for (const controller of this.#spools) controller.abort()
  }

  // Calls write() unless the content is stored. Puts of one content take turns: at once,
  // each would write it, all versions but the last dead bytes. A synced put (in a store
  // that is not synced) writes it even if stored, as that may not be durable yet.
  #unlessHeld (sha256, size, { expires, sync }, write) {
    const run = (this.#putting.get(sha256) || Promise.resolve()).then(async () => {
      if (sync || !(await this.#holds(sha256, size, expires))) await write()
    })
    const turn = run.catch(() => {})
    this.#putting.set(sha256, turn)
    turn.then(() => this.#putting.get(sha256) === turn && this.#putting.delete(sha256))
    return run
  }

  // A write's own lookup: it never gives up the reserve. Content in the trash is written
  // again, out of it.
  async #holds (sha256, size, expires) {
    const meta = await this.#files.inShardOf(sha256, async (shard) => {
      const held = await shard.getMeta(sha256)
      return held && !trashed(held, shard.restoredAt) ? held : undefined
    }, () => undefined, { useReserve: false })
    return Boolean(meta) && meta.sha256 === sha256 && meta.size === size && meta.expires === expires
  }
}

module.exports = { Puts }

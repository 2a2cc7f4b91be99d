'use strict'

const fs = require('node:fs/promises')
const path = require('node:path')
const crypto = require('node:crypto')
const { syncDir } = require('./sync-dir')
const { retryOnce } = require('./retry')
const errors = require('../api/errors')

const RESERVE_FILE = 'reserve'
const PIECE = 1024 * 1024
const HEADROOM = 4 * 1024 * 1024

// Space kept back for a full disk. LevelDB writes even to open a database (a new
// manifest, the log replayed into a table), to delete (a log record) and to compact,
// so on a disk filled to the last block a store could neither read its closed shards
// nor free space. kfs keeps a file of `size` bytes in the store and deletes it when the
// disk fills up, which lets opens, unlinks and compaction go on; new writes are then
// refused until the disk has room for the file and HEADROOM more, when it is put back.
class DiskReserve {
  #file
  #tmpDir
  #size
  #low = false
  #ensuring
  #released // whether this process gave up the reserve, since it was last made

  constructor (dir, tmpDir, size) {
    this.#file = path.join(dir, RESERVE_FILE)
    this.#tmpDir = tmpDir
    this.#size = size
  }

  // Takes stock once tmp/ exists: a reserve missing (given up by an earlier process, or
  // never made) is made only if the disk has room for it and some more.
  async init () {
    if (this.#size === 0) return
    const existing = await fs.stat(this.#file).catch(() => undefined)
    this.#low = !existing || existing.size < this.#size
    await this.roomForWrites()
  }

  // True once the reserve was given up (or could not be made): the disk is full.
  get low () {
    return this.#low
  }

  // Resolves to true if this process gave up the reserve: to every caller until it is
  // back, as operations that met the full disk at the same time (list() opens shards
  // at once) all find room after the one removal.
  release () {
    if (this.#size === 0) return Promise.resolve(false)
    this.#low = true
    if (!this.#released) this.#released = fs.rm(this.#file).then(() => true, () => false)
    return this.#released
  }

  // Runs fn; if it fails because the disk is full, gives up the reserve and tries once
  // more (LevelDB needs room to open a database, to delete and to compact).
  withRoom (fn) {
    return retryOnce(fn, (err) => errors.isDiskFull(err) && this.release())
  }

  // Whether new data may be written: after a release, only once the reserve is back.
  async roomForWrites () {
    if (!this.#low || this.#size === 0) return true
    const { bavail, bsize } = await fs.statfs(this.#tmpDir)
    if (bavail * bsize >= this.#size + HEADROOM) await this.#ensure()
    return !this.#low
  }

  // One at a time: concurrent writes that find the reserve missing share one attempt.
  #ensure () {
    if (!this.#ensuring) this.#ensuring = this.#make().finally(() => { this.#ensuring = undefined })
    return this.#ensuring
  }

  async #make () {
    if (this.#size === 0) return
    // Written in tmp/ and renamed: a reserve is either whole or absent.
    const tmp = path.join(this.#tmpDir, `${RESERVE_FILE}-${crypto.randomBytes(4).toString('hex')}`)
    const zeros = Buffer.alloc(Math.min(PIECE, this.#size))
    try {
      const handle = await fs.open(tmp, 'w')
      try {
        for (let done = 0; done < this.#size; done += zeros.length) {
          await handle.write(zeros, 0, Math.min(zeros.length, this.#size - done))
        }
        // Else a power cut can take the reserve back (ext4 allocates a new file's
        // blocks late, and a rename onto no file does not make it do so sooner), when
        // the disk may have filled meanwhile. Some filesystems report a full disk only
        // here (NFS).
        await handle.sync()
      } finally {
        await handle.close()
      }
      await fs.rename(tmp, this.#file)
      this.#low = false
      this.#released = undefined
      await syncDir(path.dirname(this.#file))
    } catch (err) {
      await fs.rm(tmp, { force: true })
      if (err.code !== 'ENOSPC' && err.code !== 'EDQUOT') throw err
      this.#low = true
    }
  }
}

module.exports = { DiskReserve, RESERVE_FILE }

'use strict'

const fs = require('node:fs/promises')
const path = require('node:path')
const crypto = require('node:crypto')
const { syncDir } = require('../base/sync-dir')
const { retryOnce } = require('./retry')
const errors = require('../api/errors')
const { Lifecycle } = require('../api/lifecycle')
const { abortable } = require('../api/abortable')

const RESERVE_FILE = 'reserve'
// Marks a full-disk error that a withRoom already tried again after.
const RETRIED = Symbol('kfs.reserve.retried')
const PIECE = 1024 * 1024
const HEADROOM = 4 * 1024 * 1024

// Space kept back for a full disk. LevelDB writes even to open a database, to delete and
// to compact: on a full disk a store could neither read closed shards nor free space. A
// file of `size` bytes is deleted when the disk fills, letting opens, unlinks and
// compaction go on; new writes wait until there is room for it and HEADROOM more again.
class DiskReserve {
  #file
  #tmpDir
  #size
  #low = false
  #ensuring
  #removing // the removal of the reserve in flight
  #removals = 0 // reserves this process gave up
  #life = new Lifecycle('open')

  constructor (dir, tmpDir, size) {
    this.#file = path.join(dir, RESERVE_FILE)
    this.#tmpDir = tmpDir
    this.#size = size
  }

  // Once tmp/ exists: a missing reserve is made only if there is room for it and more.
  async init () {
    if (this.#size === 0) return
    const existing = await fs.stat(this.#file).catch(() => undefined)
    this.#low = !existing || existing.size < this.#size
    await this.roomForWrites()
  }

  get low () {
    return this.#low
  }

  // Resolves to whether there was a reserve to give up; concurrent callers share the
  // removal. One being made (roomForWrites) is removed once made.
  release () {
    if (this.#size === 0) return Promise.resolve(false)
    this.#low = true
    if (!this.#removing) {
      const made = this.#ensuring ? this.#ensuring.catch(() => {}) : Promise.resolve()
      this.#removing = made.then(() => fs.rm(this.#file)).then(() => {
        this.#removals++
        return true
      }, () => false).finally(() => { this.#removing = undefined })
    }
    return this.#removing
  }

  // Runs fn; on a full disk, gives up the reserve and tries once more. Each operation
  // begun before the reserve was given up tries again, whoever gave it up (list() opens
  // shards at once); one begun after is not, nor a failure a nested withRoom retried.
  // `reopened(err)`: the failure left a database refusing writes until reopened (LevelDB
  // keeps a failed compaction's error): that try is made even if begun after.
  withRoom (fn, reopened = () => false) {
    const removals = this.#removals
    let tries = 0
    const attempt = async () => {
      tries++
      try {
        return await fn()
      } catch (err) {
        if (tries > 1 && errors.isDiskFull(err) && err instanceof Error) err[RETRIED] = true
        throw err
      }
    }
    return retryOnce(attempt, async (err) => {
      if (!errors.isDiskFull(err) || err[RETRIED]) return false
      return (await this.release()) || this.#removals !== removals || reopened(err)
    })
  }

  // Room for `bytes` and HEADROOM besides the reserve's, given up or not: for reclaiming.
  async hasRoom (bytes) {
    const { bavail, bsize } = await fs.statfs(this.#tmpDir)
    return bavail * bsize >= bytes + HEADROOM + (this.#low ? this.#size : 0)
  }

  // Whether new data may be written: after a release, once the reserve is back (never
  // once closed). `signal` ends the wait, not the making.
  async roomForWrites (signal) {
    if (!this.#low || this.#size === 0) return true
    if (this.#life.closing) return false
    await abortable([signal], (resolve, reject) => { this.#ensure().then(resolve, reject) })
    return !this.#low
  }

  get status () {
    return this.#life.status
  }

  // Settles once a reserve being made or given up is in place or gone; none is made after.
  close () {
    return this.#life.close(() => Promise.allSettled([this.#ensuring, this.#removing]))
  }

  // One at a time: concurrent writes that find the reserve missing share one attempt.
  #ensure () {
    if (!this.#ensuring) this.#ensuring = this.#make().finally(() => { this.#ensuring = undefined })
    return this.#ensuring
  }

  async #make () {
    if (this.#size === 0) return
    const { bavail, bsize } = await fs.statfs(this.#tmpDir)
    if (bavail * bsize < this.#size + HEADROOM) return
    // Written in tmp/ and renamed: a reserve is either whole or absent.
    const tmp = path.join(this.#tmpDir, `${RESERVE_FILE}-${crypto.randomBytes(4).toString('hex')}`)
    const zeros = Buffer.alloc(Math.min(PIECE, this.#size))
    try {
      const handle = await fs.open(tmp, 'w')
      try {
        for (let done = 0; done < this.#size; done += zeros.length) {
          await handle.write(zeros, 0, Math.min(zeros.length, this.#size - done))
        }
        // Else a power cut can take the reserve back (ext4 allocates blocks late) once
        // the disk filled. NFS may report a full disk only here.
        await handle.sync()
      } finally {
        await handle.close()
      }
      await fs.rename(tmp, this.#file)
      // A release asked meanwhile removes it once made.
      if (!this.#removing) this.#low = false
      await syncDir(path.dirname(this.#file))
    } catch (err) {
      await fs.rm(tmp, { force: true })
      if (err.code !== 'ENOSPC' && err.code !== 'EDQUOT') throw err
      this.#low = true
    }
  }
}

module.exports = { DiskReserve, RESERVE_FILE }

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
  #removing // the removal of the reserve in flight
  #removals = 0 // reserves this process gave up
  #life = new Lifecycle('open')

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

  // Resolves to true if there was a reserve to give up; callers while it is being
  // removed share the removal. A reserve being made (roomForWrites) is removed once it
  // is made, so that what met the full disk meanwhile finds its room.
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

  // Runs fn; if it fails because the disk is full, gives up the reserve and tries once
  // more (LevelDB needs room to open a database, to delete and to compact). Operations
  // that met the full disk at the same time (list() opens shards at once) all try
  // again if the reserve was given up since they began, not only the one that removed
  // it; one that begins later, on a disk still full, is not retried, and a failure
  // already retried by a withRoom inside fn is not retried again. `reopened(err)`: the
  // failure left a database refusing writes until reopened (LevelDB keeps the error of
  // a compaction that met the full disk, and reports it at the next write), which the
  // next try reopens: that try is made even if the reserve was given up before.
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

  // Whether the disk has room for `bytes` and HEADROOM more besides the reserve's, given
  // up or not: for work that can wait (reclaiming), which must leave the reserve's room.
  async hasRoom (bytes) {
    const { bavail, bsize } = await fs.statfs(this.#tmpDir)
    return bavail * bsize >= bytes + HEADROOM + (this.#low ? this.#size : 0)
  }

  // Whether new data may be written: after a release, only once the reserve is back
  // (never made again once closed). The wait for it to be made ends with signal.reason
  // if `signal` aborts; the making goes on for the others.
  async roomForWrites (signal) {
    if (!this.#low || this.#size === 0) return true
    if (this.#life.closing) return false
    await abortable([signal], (resolve, reject) => { this.#ensure().then(resolve, reject) })
    return !this.#low
  }

  get status () {
    return this.#life.status
  }

  // Every caller's promise settles once the reserve being made or given up, if any, is
  // in place or gone; none is made after.
  close () {
    return this.#life.close(() => Promise.allSettled([this.#ensuring, this.#removing]))
  }

  // One at a time: concurrent writes that find the reserve missing share one attempt.
  #ensure () {
    if (!this.#ensuring) this.#ensuring = this.#make().finally(() => { this.#ensuring = undefined })
    return this.#ensuring
  }

  // Made only if the disk has room for it and HEADROOM more.
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
        // Else a power cut can take the reserve back (ext4 allocates a new file's
        // blocks late, and a rename onto no file does not make it do so sooner), when
        // the disk may have filled meanwhile. Some filesystems report a full disk only
        // here (NFS).
        await handle.sync()
      } finally {
        await handle.close()
      }
      await fs.rename(tmp, this.#file)
      // A release asked meanwhile removes this reserve once made: the disk stays low.
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

'use strict'

const records = require('./records')
const scans = require('./scans')
const errors = require('../api/errors')
const { free } = require('../base/freed')
const { removeFile, trashOps } = require('./batches')
const { decodeHead } = require('./head-record')
const { expiredFiles, trashedFiles } = require('./due-files')

// Expiry records a collection removes in one batch (collectExpired), and trash records an
// emptying (emptyTrash).
const COLLECT_BATCH = 1000

// A shard's removals: of files, taken out of readers' sight (unlink, trash, the collection
// of expired files, the emptying of the trash), and of versions never committed; and the
// shard's earliest expiry as files come and go. A change to files runs in the shard's
// exclusive section, as every change to its keys. `shard`: the Shard; `own`, what only the shard reaches:
// write(ops, sync) (Shard#write), apply(ops, account, sync) (Shard#apply), and its
// deadSpace (DeadSpace), prints (Fingerprints) and trash (TrashCount).
class Removals {
  #shard
  #own

  constructor (shard, own) {
    this.#shard = shard
    this.#own = own
  }

  unlink (key, { sync = false } = {}) {
    const shard = this.#shard
    return shard.exclusive(async () => {
      await shard.room()
      const old = await shard.getMeta(key)
      // A head left without its metadata (damage) is the file a read finds.
      const head = old ? undefined : await shard.db.get(key)
      if (head !== undefined) {
        await this.#own.write([{ type: 'del', key }, { type: 'put', key: records.deadKey(key, head.toString('hex', 8, 16)), value: String(head.length) }], shard.sync || sync)
        return this.#own.deadSpace.died(head.length)
      }
      if (!old || records.trashed(old, shard.restoredAt)) throw errors.notFound(key)
      const ops = []
      removeFile(ops, shard.chunkKeys, old)
      const notDurable = await this.removeAll(ops, [old], sync)
      await this.expiryGone(old)
      if (notDurable) throw notDurable
    })
  }

  // Marks `key`'s version trashed at `time` (doc/format.md, "Trash"): readers find no file
  // from then on, until a restore. ENOENT if readers find none now. Synced as unlink is.
  trash (key, time, { sync = false } = {}) {
    const shard = this.#shard
    return shard.exclusive(async () => {
      await shard.room()
      const meta = await shard.getMeta(key)
      if (!meta || records.gone(meta, Date.now(), shard.restoredAt)) throw errors.notFound(key)
      const data = meta.inline ? await this.#inlineData(key) : undefined
      const { ops, head } = trashOps(meta, time, data)
      let notDurable
      try {
        notDurable = await this.#own.apply(ops, { used: shard.used, files: shard.files }, sync)
      } finally {
        if (head) free(head)
      }
      if (data && data.length > 0) this.#own.deadSpace.died(data.length)
      if (this.#own.trash.added(meta, time)) shard.onExpiry(shard)
      if (notDurable) throw notDurable
    })
  }

  // The data an inline head holds, to write it again.
  async #inlineData (key) {
    const head = await this.#shard.db.get(key)
    if (head === undefined) throw errors.integrity(key, 'its head record is missing', { chunk: 0 })
    return Buffer.from(decodeHead(key, head).data)
  }

  // Removes the files whose expiry record is due at `now`, up to `limit` records, in one batch
  // with the accounting, as unlink does. A record naming a version replaced since goes alone.
  // Resolves to the files removed and whether records may be left due; nextExpiry is read
  // again from the index.
  collectExpired (now, limit = COLLECT_BATCH) {
    const shard = this.#shard
    return shard.exclusive(async () => {
      await shard.room()
      const { ops, gone, more } = await expiredFiles(shard, now, limit)
      const notDurable = await this.removeAll(ops, gone, false)
      shard.nextExpiry = await scans.firstExpiry(shard.db)
      if (notDurable) throw notDurable
      return { files: gone.length, more }
    })
  }

  // Removes for good, in one synced batch, up to `limit` files in the trash trashed before
  // `before` (ms); `restoredAt`: the restore time the caller holds still (the trash lock).
  // Resolves to { files, bytes, more }.
  emptyTrash (restoredAt, before, limit = COLLECT_BATCH) {
    const shard = this.#shard
    return shard.exclusive(async () => {
      await shard.room()
      const { ops, gone, more } = await trashedFiles(shard, restoredAt, before, limit)
      const notDurable = await this.removeAll(ops, gone, true)
      if (gone.length) shard.trashFigures().first = await scans.firstTrash(shard.db, restoredAt)
      if (notDurable) throw notDurable
      return { files: gone.length, bytes: gone.reduce((sum, meta) => sum + meta.size, 0), more }
    })
  }

  // Writes `ops`, which remove the versions `gone`, with the accounting. Resolves to the
  // error of a batch made that may not be durable (Shard#apply).
  async removeAll (ops, gone, sync) {
    if (!ops.length) return undefined
    const shard = this.#shard
    const used = gone.reduce((sum, meta) => sum + meta.size, 0)
    const notDurable = await this.#own.apply(ops, { used: shard.used - used, files: shard.files - gone.length }, sync)
    this.#own.deadSpace.died(used)
    for (const meta of gone) {
      this.#own.prints.removed(meta.key, shard.files)
      this.#own.trash.removed(meta)
    }
    return notDurable
  }

  async discard (key, version) {
    const shard = this.#shard
    await shard.db.clear(shard.chunkKeys.range(key, version))
    await shard.db.batch([{ type: 'del', key: records.pendingKey(version) }])
  }

  // Discards the pending versions not being written by this process: what a crash or a failed
  // cleanup left. Exclusive of commits, which leave `writing` in their own section.
  discardAbandoned () {
    const shard = this.#shard
    return shard.exclusive(async () => {
      for (const { key, version } of await scans.pendingVersions(shard.db)) {
        if (!shard.writing.has(version)) await this.discard(key, version)
      }
    })
  }

  // After a commit of `meta`, in place of `old` if any, in the exclusive section: the
  // shard's earliest expiry, sooner by `meta`'s, or read again if `old` held it.
  async expiryCommitted (meta, old) {
    const shard = this.#shard
    if (meta.expires !== undefined && !(shard.nextExpiry <= meta.expires)) {
      shard.nextExpiry = meta.expires
      shard.onExpiry(shard)
    } else if (old) {
      await this.expiryGone(old)
    }
  }

  // After `old` was removed or replaced, in the exclusive section: if it held the shard's
  // earliest expiry, the next one is read again from the index, so that the collector does
  // not lease the shard (open it, if closed: the usage cache keeps nextExpiry) to find
  // nothing due. A failed read keeps the earlier time, which costs that lease only.
  async expiryGone (old) {
    const shard = this.#shard
    if (old.expires === undefined || old.expires !== shard.nextExpiry) return
    shard.nextExpiry = await scans.firstExpiry(shard.db).catch(() => shard.nextExpiry)
  }
}

module.exports = { Removals }

'use strict'

const errors = require('../api/errors')
const { ChunkKeys } = require('../shard/records')
const { Shards } = require('../shard/shards')
const { Files } = require('../data/files')
const { Digester } = require('../data/digester')
const { ReadAhead } = require('../data/read-ahead')
const { memoryParts } = require('../api/memory')
const { list } = require('../data/list')
const { Puts } = require('../data/put')
const { readFile } = require('../data/read-file')
const { UsageCache } = require('../dir/usage-cache')
const { diskUsage, reserveBytes } = require('../dir/disk-usage')
const { verify } = require('../maintenance/verify')
const { repair } = require('../maintenance/repair')
const { compact } = require('../maintenance/compact')
const { Reclaimer } = require('../maintenance/reclaimer')
const { Collector } = require('../maintenance/expiry')
const { Trash } = require('../maintenance/trash')
const { Holder, removeStaleSocket } = require('../share/server')

// The store opened in this process, which holds it: the local backend of a Store
// (backends.js), with the remote one's calls (lib/share/client.js). `sync`: the write
// must be synced; a store opened with `sync` syncs every write unasked.
class LocalStore {
  #shared
  #digester // SHA-256 of large files on a thread (data/digester.js)
  #readAhead // the memory budget's share for readers (data/read-ahead.js)
  #tmpDir
  #shards
  #files
  #puts
  #usage
  #reserve
  #reclaimer
  #collector
  #trash
  #holder // serving other processes

  // `opened`: the store's directory, opened (dir/store-dir.js).
  // A store opened read-write holds its lock: a socket found then is stale (server.js).
  static async open (opened, shared) {
    let usage
    let takenOver = false
    try {
      usage = await UsageCache.load(opened.state, opened.reopenState)
      if (!shared.options.readOnly) takenOver = await removeStaleSocket(shared.location)
    } catch (err) {
      await opened.state.close().catch(() => {})
      throw err.code ? err : errors.corrupt(`the store state at ${shared.location}`, err.message, { cause: err })
    }
    return new LocalStore({ ...opened, takenOver }, usage, shared)
  }

  constructor (opened, usage, shared) {
    const { format, tmpDir, reserve } = opened
    const { location, options, operations, writeBudget } = shared
    // The parts only a store opened here uses, made here: a process using the store
    // through its holder never loads them.
    const digester = this.#digester = new Digester()
    const readAhead = this.#readAhead = new ReadAhead(memoryParts(options.memory).readAhead)
    this.format = format
    this.takenOver = Boolean(opened.takenOver) // from a holder that ended without closing it
    this.#shared = shared
    this.#tmpDir = tmpDir
    this.#usage = usage
    this.#reserve = reserve
    const trash = this.#trash = new Trash({ usage, days: options.trashDays })
    const shards = this.#shards = new Shards({
      location,
      tmpDir,
      cap: format.shardCap,
      chunkKeys: new ChunkKeys(format.shardCap, format.chunkSize),
      shardCount: format.shardCount,
      existing: opened.shards,
      usage,
      reserve,
      operations,
      options,
      heldAbove: () => writeBudget.held + readAhead.held,
      clock: trash
    })
    trash.shards = shards
    const { referenceId, shardCount, chunkSize } = format
    this.#files = new Files({ shards, referenceId: Buffer.from(referenceId, 'hex'), shardCount, chunkSize, writeBudget, readAhead })
    this.#puts = new Puts({ files: this.#files, digester, tmpDir, cap: format.shardCap })
    this.#reclaimer = new Reclaimer({
      openShards: () => shards.openShards(),
      inShard: (index, fn, { admitted } = {}) => shards.inShard(index, fn, { admitted }), // never with the reserve
      writing: () => shards.writing(),
      room: (piece) => shards.roomToCompact(piece),
      enabled: options.reclaim && !options.readOnly
    })
    shards.onDead = () => this.#reclaimer.noteDead()
    // A store opened read-only collects nothing; its reads still hide expired files.
    this.#collector = Collector.forStore({ shards, usage, trash, enabled: !options.readOnly })
    shards.onWrite = () => this.#reclaimer.noteWrite()
  }

  get heldBy () {
    return this.#shared.options.readOnly ? undefined : process.pid
  }

  // Serves other processes (`share`), and opens the shards in the background. A store
  // opened read-only serves nobody, and is read through shadows, which cost more to open
  // than a shard: its shards open on first use.
  async serve () {
    const { options, served, location, operations } = this.#shared
    if (options.share && !options.readOnly) {
      const holder = new Holder(served, location)
      if (await holder.listen(this.#tmpDir)) this.#holder = holder
    }
    if (options.openAhead && !options.readOnly && !operations.closed) this.#shards.openAhead()
  }

  writeFile (file, buffer, { sha256, expires }) {
    return this.#files.write(file, [buffer], { size: buffer.length, sha256, expires })
  }

  readFile (file, { unchecked }) {
    return readFile(this.#files, this.#digester, file.key, { unchecked })
  }

  openWriter (file, { expectedSha256, size, expires, sync, signal }) {
    return this.#files.openWriter(file, { expectedSha256, size, expires, sync: this.#asked(sync), signal })
  }

  openReader (file, range, { unchecked, signal }) {
    return this.#files.openReader(file.key, range, { unchecked, signal })
  }

  put (buffer, { expires, sync }) {
    return this.#puts.put(buffer, { expires, sync: this.#asked(sync) })
  }

  putStream (readable, { expires, sync }) {
    return this.#puts.putStream(readable, { expires, sync: this.#asked(sync) })
  }

  exists ({ key }) {
    return this.#files.inShardOf(key, async (shard) => Boolean(await shard.getLiveMeta(key)), () => false)
  }

  stat ({ key }) {
    return this.#files.inShardOf(key, async (shard) => {
      const meta = await shard.getLiveMeta(key)
      if (!meta) throw errors.notFound(key)
      const stat = { key, size: meta.size, chunks: meta.chunks, shard: shard.index, mtime: new Date(meta.mtime), sha256: meta.sha256 }
      if (meta.name !== undefined) stat.name = meta.name
      if (meta.expires !== undefined) stat.expires = new Date(meta.expires)
      return stat
    }, () => { throw errors.notFound(key) })
  }

  unlink ({ key }, { sync }) {
    return this.#files.inShardOf(key, (shard) => shard.unlink(key, { sync: this.#asked(sync) }), () => { throw errors.notFound(key) })
  }

  trash ({ key }, { sync }) {
    return this.#files.inShardOf(key, (shard) => shard.trash(key, this.#trash.time(), { sync: this.#asked(sync) }), () => { throw errors.notFound(key) })
  }

  restoreTrash () {
    return this.#trash.restore()
  }

  // `before`: ms, or undefined for every file in the trash.
  emptyTrash ({ before }) {
    return this.#trash.empty(before)
  }

  // `admitted`: a listing the holder serves (args.SERVED).
  list (only, { admitted }) {
    return list(this.#shards, only, this.#shared.operations, { admitted })
  }

  async usage () {
    const { shardCap, shardCount } = this.format
    const shards = []
    for (const index of this.#shards.indices()) {
      const record = await this.#shards.figures(index)
      const { files, bytes } = this.#shards.trashOf(record)
      shards.push({ index, used: record.used, free: shardCap - record.used, files: record.files, diskBytes: record.diskBytes, reclaimable: record.dead, trash: { files, bytes } })
    }
    const used = shards.reduce((sum, s) => sum + s.used, 0)
    const capacity = shardCap * shardCount
    const reserve = await reserveBytes(this.#shared.location)
    const reclaimable = shards.reduce((sum, s) => sum + s.reclaimable, 0)
    const trash = { files: shards.reduce((sum, s) => sum + s.trash.files, 0), bytes: shards.reduce((sum, s) => sum + s.trash.bytes, 0) }
    return { used, free: capacity - used, capacity, files: shards.reduce((sum, s) => sum + s.files, 0), reclaimable, reserve, trash, shards }
  }

  // usage()'s totals and what the store did, from figures kept as they change: no shard is
  // opened, no directory walked (doc/api.md, "Metrics", says how fresh each is).
  async metrics () {
    const { location, options, writeBudget, counts } = this.#shared
    const readAhead = this.#readAhead
    const [totals, reserve] = await Promise.all([this.#shards.totals(), reserveBytes(location)])
    const activity = this.#shards.activity()
    const { shardCap, shardCount } = this.format
    return {
      files: totals.files,
      fileBytes: totals.used,
      capacityBytes: shardCap * shardCount,
      diskBytes: totals.diskBytes,
      reclaimableBytes: totals.dead,
      reserveBytes: reserve,
      shards: totals.shards,
      shardsOpen: activity.open,
      shardsUncounted: totals.uncounted,
      memory: { budget: options.memory, write: writeBudget.held, readahead: readAhead.held, memtables: this.#shards.memtables.total },
      shardOpens: activity.opens,
      shardCloses: activity.closes,
      flushes: { budget: activity.flushes, quiet: activity.quietFlushes },
      reclaims: { runs: this.#reclaimer.runs, pieces: this.#reclaimer.pieces },
      expiries: { runs: this.#collector.runs, files: this.#collector.files },
      trash: { files: totals.trash.files, bytes: totals.trash.bytes, emptied: this.#collector.trashFiles },
      clients: this.#holder ? this.#holder.clients : 0,
      operations: counts.snapshot()
    }
  }

  diskUsage () {
    return diskUsage(this.#shared.location)
  }

  reclaim () {
    return this.#reclaimer.reclaimNow()
  }

  compact () {
    return compact(this.#shards)
  }

  verify (checked) {
    return verify(this.#maintenance(), checked)
  }

  // A repaired shard is closed: its work due, in the usage cache, goes to the collector.
  async repair (shard) {
    const result = await repair(this.#maintenance(), shard)
    this.#collector.noteClosed(shard)
    return result
  }

  // Every resource is released even when one fails to close; the first failure is
  // then reported.
  async close () {
    const { writeBudget, streams, operations } = this.#shared
    // Other processes' requests the holder accepted end first, their streams with them;
    // it refuses later ones as not carried out, and their clients go to the next holder.
    if (this.#holder) await this.#holder.close()
    // Writes waiting for the write budget fail, like those waiting for a shard: nothing
    // they wait for is certain to come now. (A wait for a memtable flush ends with it.)
    writeBudget.shutdown(errors.closed())
    streams.destroy({ all: true })
    this.#puts.stop()
    await this.#collector.stop()
    await this.#reclaimer.stop()
    this.#shards.shutdown() // operations waiting for a shard fail now, so they drain
    await Promise.all([operations.drained(), streams.closed()])
    const results = await Promise.allSettled([this.#shards.closeAll(), this.#digester.close()])
    results.push(...(await Promise.allSettled([this.#usage.close(), this.#reserve.close()])))
    const failed = results.find((r) => r.status === 'rejected')
    if (failed) throw failed.reason
  }

  // Whether a write asks for a sync the store does not make anyway.
  #asked (sync) {
    return sync && !this.#shared.options.sync
  }

  #maintenance () {
    return { shards: this.#shards, chunkSize: this.format.chunkSize, shardCount: this.format.shardCount }
  }
}

module.exports = { LocalStore }

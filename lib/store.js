'use strict'

const path = require('node:path')
const { setTimeout: delay } = require('node:timers/promises')
const { parseOptions } = require('./api/options')
const { memoryParts } = require('./api/memory')
const { coerceKey, sha256Of } = require('./api/keys')
const { Operations } = require('./api/operations')
const args = require('./api/args')
const errors = require('./api/errors')
const { Lifecycle } = require('./api/lifecycle')
const { OpenStreams } = require('./api/open-streams')
const { ChunkKeys } = require('./shard/records')
const { Shards } = require('./shard/shards')
const { Digester } = require('./data/digester')
const { Files } = require('./data/files')
const { list } = require('./data/list')
const { Puts } = require('./data/put')
const { ReadAhead } = require('./data/read-ahead')
const { readFile } = require('./data/read-file')
const { WriteStream, ReadStream } = require('./data/streams')
const { WriteBudget } = require('./data/write-budget')
const { UsageCache } = require('./dir/usage-cache')
const storeDir = require('./dir/store-dir')
const { diskUsage, reserveBytes } = require('./dir/disk-usage')
const { verify } = require('./maintenance/verify')
const { repair } = require('./maintenance/repair')
const { compact } = require('./maintenance/compact')
const { Reclaimer } = require('./maintenance/reclaimer')
const { Holder } = require('./share/server')
const { Remote, CONNECT_MS } = require('./share/client')
const { CLOSING, IDEMPOTENT, NOT_SENT, NEVER, again } = require('./share/failures')
const { socketPath } = require('./share/protocol')
const { unreachedWhy } = require('./share/unreached')

// writeFile hashes data up to this size in one call (larger, chunk by chunk as it goes).
const ONE_CALL_HASH = 1024 * 1024
// While another process holds the store and its socket does not answer yet (it is
// starting, or a holder that was killed left it), the open is tried again after
// RETRY_MS and up to as much again at random (clients that lost one holder do not all
// try at once), for CONNECT_MS in all; each connect is given at least CONNECT_FLOOR_MS.
const RETRY_MS = 50
const CONNECT_FLOOR_MS = 500
const retryDelay = () => delay(RETRY_MS * (1 + Math.random()))

// The public store. Every method that returns a promise checks its arguments inside
// it, so bad input rejects (EINVAL) and never throws; list() and the stream factories
// throw EINVAL at once, like fs.createReadStream. Everything that needs the disk waits
// for open().
class Store {
  #given
  #options
  #opening
  #life = new Lifecycle()
  #operations = new Operations()
  #streams = new OpenStreams(() => this.#operations.closed)
  #digester = new Digester()
  #writeBudget
  #readAhead
  #format // set by #open, with:
  #shards
  #files
  #puts
  #usage
  #reserve
  #reclaimer
  #holder // serving other processes, while this one holds the store
  #remote // the process that holds the store, when another does
  #remotes = new Set() // every Remote this store used, closed at close()

  constructor (dir, options) {
    if (typeof dir !== 'string' || dir === '') throw errors.invalidType('dir', 'a non-empty string', dir)
    const { given, resolved } = parseOptions(options)
    this.location = path.resolve(dir)
    this.#given = given
    this.#options = resolved
    const { writes, readAhead } = memoryParts(resolved.memory)
    this.#writeBudget = new WriteBudget(writes)
    this.#readAhead = new ReadAhead(readAhead)
  }

  get referenceId () {
    return this.#format && this.#format.referenceId
  }

  get chunkSize () {
    return this.#format ? this.#format.chunkSize : this.#options.chunkSize
  }

  get shardCapacity () {
    return this.#format && this.#format.shardCap
  }

  get shardCount () {
    return this.#format ? this.#format.shardCount : this.#options.shardCount
  }

  // The process ID of the process that holds the store: this one's, or that of the one
  // it is used through (`share`); undefined until open, after close, once the holder
  // went away (until the next call opens the store again), and where the store is read
  // here read-only (no process holds it).
  get heldBy () {
    if (this.#operations.closed) return undefined
    if (this.#remote) return this.#remote.info.pid
    return this.#opening && this.#reclaimer && !this.#options.readOnly ? process.pid : undefined
  }

  // 'opening' until an open succeeded (every call opens the store, and a failed open is
  // tried again by the next), then 'open'; 'closing' from close() on, 'closed' once
  // everything it holds is released.
  get status () {
    return this.#life.status
  }

  // Idempotent; every method calls it, so calling it yourself only surfaces errors
  // (EBUSY, EINVAL, ENOENT, ECORRUPT, ENOTDIR, ENOTSUP, EROFS, EACCES, EPERM) early. A
  // failed open is not remembered: the next call tries again (after EBUSY, say).
  open (...given) {
    const bad = args.arityError('open', given, [])
    if (bad) return Promise.reject(bad)
    if (this.#operations.closed) return Promise.reject(errors.closed())
    if (!this.#opening) {
      this.#opening = this.#open().catch((err) => {
        this.#opening = undefined
        throw err
      })
    }
    return this.#opening
  }

  // Opens the store here, or, where another process holds it and shares it, reaches
  // that process. Until CONNECT_MS passed, either is tried again while neither works:
  // the holder may be starting (its lock taken, its socket not yet there), or may have
  // just gone, its lock free for this process to take (and others may be trying to
  // open it at the same moment: storeDir.OPEN_AGAIN).
  async #open () {
    let deadline = Date.now() + CONNECT_MS
    let opened
    let unreached // the last failure to reach a holder
    while (!opened) {
      try {
        opened = await storeDir.openStoreDir(this.location, this.#given, this.#options)
      } catch (err) {
        if (err[storeDir.OPEN_AGAIN] && Date.now() < deadline && !this.#operations.closed) {
          await retryDelay() // another process opened it at the same moment
          continue
        }
        if (err.code !== 'EBUSY' || err.shard !== undefined) throw err
        const remote = this.#options.share && await Remote.connect(socketPath(this.location), {
          timeout: Math.max(CONNECT_FLOOR_MS, deadline - Date.now()),
          onLost: (gone) => this.#lost(gone)
        }).catch((failure) => { unreached = failure })
        if (remote) return this.#through(remote)
        // A holder that says it is closing is finishing its requests: the store is
        // free once it closed, however long that takes.
        if (unreached && unreached[CLOSING]) deadline = Math.max(deadline, Date.now() + CONNECT_MS)
        if (!this.#options.share || Date.now() >= deadline || this.#operations.closed) throw await storeDir.busy(this.location, err, { shared: this.#options.share, why: unreached && await unreachedWhy(this.location, unreached) })
        await retryDelay()
      }
    }
    let usage
    try {
      usage = await UsageCache.load(opened.state, opened.reopenState)
    } catch (err) {
      await opened.state.close().catch(() => {})
      throw err.code ? err : errors.corrupt(`the store state at ${this.location}`, err.message, { cause: err })
    }
    const { format } = opened
    this.#format = format
    this.#usage = usage
    this.#reserve = opened.reserve
    this.#shards = new Shards({
      location: this.location,
      tmpDir: opened.tmpDir,
      cap: format.shardCap,
      chunkKeys: new ChunkKeys(format.shardCap, format.chunkSize),
      shardCount: format.shardCount,
      existing: opened.shards,
      usage,
      reserve: opened.reserve,
      operations: this.#operations,
      options: this.#options,
      heldAbove: () => this.#writeBudget.held + this.#readAhead.held
    })
    this.#files = new Files({
      shards: this.#shards,
      referenceId: Buffer.from(format.referenceId, 'hex'),
      shardCount: format.shardCount,
      chunkSize: format.chunkSize,
      writeBudget: this.#writeBudget,
      readAhead: this.#readAhead
    })
    this.#puts = new Puts({ files: this.#files, digester: this.#digester, tmpDir: opened.tmpDir, cap: format.shardCap })
    const shards = this.#shards
    this.#reclaimer = new Reclaimer({
      openShards: () => shards.openShards(),
      inShard: (index, fn, { admitted } = {}) => shards.inShard(index, fn, { admitted }), // never with the reserve
      writing: () => shards.writing(),
      room: (piece) => shards.roomToCompact(piece),
      enabled: this.#options.reclaim && !this.#options.readOnly
    })
    shards.onDead = () => this.#reclaimer.noteDead()
    shards.onWrite = () => this.#reclaimer.noteWrite()
    if (this.#options.share && !this.#options.readOnly) {
      const holder = new Holder(this, this.location)
      if (await holder.listen(opened.tmpDir)) this.#holder = holder
    }
    // A store opened read-only is read through shadows, which cost more to open than a
    // shard, and is rarely read long: its shards open on first use.
    if (this.#options.openAhead && !this.#options.readOnly && !this.#operations.closed) shards.openAhead()
    if (!this.#operations.closed) this.#life.opened()
  }

  #through (remote) {
    this.#remotes.add(remote)
    const { info } = remote
    this.#format = { referenceId: info.referenceId, chunkSize: info.chunkSize, shardCap: info.shardCapacity, shardCount: info.shardCount }
    this.#remote = remote
    if (!this.#operations.closed) this.#life.opened()
  }

  // The holder went away (closed, crashed, killed): the next call opens the store
  // again, so that it holds the store itself or reaches the next holder.
  #lost (remote) {
    if (this.#remote !== remote || this.#operations.closed) return
    this.#remote = undefined
    this.#opening = undefined
  }

  // Runs fn on the open store as an operation close() waits for, or `remote` on the
  // process that holds it (`share`). A write (`write`) to a store opened read-only is
  // refused (EROFS) before it opens. `retry`: when the call may be made again after its
  // holder went away (#opened). `file`: the coerced key of the file concerned, whose
  // name its errors then give.
  // One async function: each promise between the caller and fn is a turn of the
  // microtask queue on every call, which a read of a small file feels.
  async #op (fn, { write = false, remote, retry, file }) {
    let leave
    try {
      leave = this.#operations.enter()
      if (write) this.#writable()
      // On a store open here, fn at once: #opened would add a promise.
      return await (this.#reclaimer && !this.#remote ? fn() : this.#opened(fn, remote, retry))
    } catch (err) {
      throw file ? errors.named(err, file) : err
    } finally {
      if (leave) leave()
    }
  }

  // fn() on the store open here, or remote(holder) on the store used through another
  // process. A call the holder did not carry out (it could not be reached, or was
  // closing) is made again, through the next holder or here, until CONNECT_MS after
  // its first failure; so is one that may have been carried out, if `retry` is
  // IDEMPOTENT (a second attempt ends as the first would have). `retry` NOT_SENT: only
  // if nothing of it was sent (its body, a Readable, is still unread).
  async #opened (fn, remote, retry) {
    let deadline
    for (;;) {
      if (!this.#reclaimer && !this.#remote) await this.open() // #open() sets one of them last
      if (!this.#remote) return fn()
      const holder = this.#remote
      try {
        return await remote(holder)
      } catch (err) {
        deadline = await this.#retried(err, retry, holder, deadline)
      }
    }
  }

  // After `err` through `holder`: throws it unless the call is made again (#opened), and
  // resolves to the time until which it is. Only the first attempt again is made at
  // once: a holder that fails call after call is not asked in a busy loop.
  async #retried (err, retry, holder, deadline) {
    if (this.#operations.closed || !again(err, retry) || Date.now() >= (deadline || Infinity)) throw err
    this.#lost(holder)
    if (deadline) await retryDelay()
    return deadline || Date.now() + CONNECT_MS
  }

  // Whether a write asked for SYNC needs it: a synced store syncs every write.
  #synced (options) {
    return args.synced(options) && !this.#options.sync
  }

  // Whether a write through the holder must be synced: this store's `sync`, or SYNC.
  #syncAsked (options) {
    return this.#options.sync || args.synced(options)
  }

  #writable () {
    if (this.#options.readOnly) throw errors.readOnly(`the store at ${this.location}`, { path: this.location })
  }

  #maintenance () {
    return { shards: this.#shards, chunkSize: this.chunkSize, shardCount: this.shardCount }
  }

  async writeFile (key, data) {
    args.arity('writeFile', arguments, ['key', 'data'])
    const target = coerceKey(key)
    const buffer = args.toBuffer(data)
    // A small file is hashed in one call, cheaper than a hash object fed chunk by chunk.
    const sha256 = buffer.length <= ONE_CALL_HASH ? sha256Of(buffer) : undefined
    // Made again only if the holder did not carry it out: if the first was made, a
    // second would make it twice, over a write of another caller in between.
    await this.#op(() => this.#files.write(target, [buffer], { size: buffer.length, sha256 }), { write: true, file: target, remote: (r) => r.writeFile(key, buffer, { sync: this.#options.sync }) })
  }

  async readFile (key, options) {
    args.arity('readFile', arguments, ['key'], typeof options === 'string' || (options && options.encoding) ? 'it resolves to a Buffer: call toString() on it for text' : undefined)
    const file = coerceKey(key)
    const unchecked = Boolean(options && options[args.UNCHECKED])
    return await this.#op(() => readFile(this.#files, this.#digester, file.key, { unchecked }), { retry: IDEMPOTENT, file, remote: (r) => r.readFile(key) })
  }

  createWriteStream (key, options) {
    args.arity('createWriteStream', arguments, ['key', 'options'], undefined, 'a stream')
    const target = coerceKey(key)
    const { sha256: expectedSha256, size } = args.writeOptions(options)
    const served = args.served(options)
    const admit = this.#streams.admission(served)
    return this.#streams.add(new WriteStream((signal) => Promise.resolve().then(() => {
      admit()
      this.#writable()
      return this.#opened(
        () => this.#files.openWriter(target, { expectedSha256, size, sync: this.#synced(options), signal }),
        (r) => r.openWriter(key, { expectedSha256, size, sync: this.#syncAsked(options) })
      )
    }), (err) => errors.named(err, target), { frees: served }), served)
  }

  createReadStream (key, options) {
    args.arity('createReadStream', arguments, ['key', 'options'], undefined, 'a stream')
    const file = coerceKey(key)
    const range = args.range(options)
    const unchecked = Boolean(options && options[args.UNCHECKED])
    const served = args.served(options)
    const admit = this.#streams.admission(served)
    return this.#streams.add(new ReadStream((signal) => Promise.resolve().then(() => {
      admit()
      // Opened through the next holder if the holder went away before the first bytes.
      return this.#opened(() => this.#files.openReader(file.key, range, { unchecked, signal }), (r) => r.openReader(key, range), IDEMPOTENT)
    }), (err) => errors.named(err, file)), served)
  }

  // Content addressing: resolves to the key, the SHA-256 of the content; content
  // already stored is not written again. `options`: internal (args.SYNC).
  async put (data, options) {
    try {
      args.arity('put', arguments, ['data'], 'it stores content under its SHA-256 and resolves to that key; to store data under a key of your own, use writeFile(key, data)')
    } catch (err) {
      if (args.isReadable(data)) data.destroy() // as a put that never reads it does
      throw err
    }
    if (args.isReadable(data)) return this.#putStream(data, options)
    const buffer = args.toBuffer(data)
    const sync = this.#synced(options)
    return this.#op(() => this.#puts.put(buffer, { sync }), { write: true, retry: IDEMPOTENT, remote: (r) => r.put(buffer, { sync: this.#syncAsked(options) }) })
  }

  // The Readable gets its first 'error' listener only when spooling starts, once the
  // store is open: an error it emits before is kept here, not left to kill the process,
  // and a put that ends without reading it destroys it, as pipeline() would.
  async #putStream (readable, options) {
    let early
    const keep = (err) => { early = early || err }
    readable.on('error', keep)
    try {
      return await this.#op(() => {
        if (early) throw early
        return this.#puts.putStream(readable, { sync: this.#synced(options) })
      }, {
        write: true,
        remote: (r) => {
          if (early) throw early
          return r.put(readable, { sync: this.#syncAsked(options) })
        },
        retry: NOT_SENT
      })
    } catch (err) {
      readable.destroy()
      throw err
    } finally {
      readable.off('error', keep)
    }
  }

  async exists (key) {
    args.arity('exists', arguments, ['key'])
    const file = coerceKey(key)
    const k = file.key
    return this.#op(() => this.#files.inShardOf(k, async (shard) => Boolean(await shard.getMeta(k)), () => false), { retry: IDEMPOTENT, file, remote: (r) => r.call('exists', key) })
  }

  async stat (key) {
    args.arity('stat', arguments, ['key'])
    const file = coerceKey(key)
    const k = file.key
    return this.#op(() => this.#files.inShardOf(k, async (shard) => {
      const meta = await shard.getMeta(k)
      if (!meta) throw errors.notFound(k)
      const stat = { key: k, size: meta.size, chunks: meta.chunks, shard: shard.index, mtime: new Date(meta.mtime), sha256: meta.sha256 }
      if (meta.name !== undefined) stat.name = meta.name
      return stat
    }, () => { throw errors.notFound(k) }), { retry: IDEMPOTENT, file, remote: (r) => r.stat(key) })
  }

  // `options`: internal (args.SYNC). Made again only if the holder did not carry it
  // out: the second would answer ENOENT for a file the first removed.
  async unlink (key, options) {
    args.arity('unlink', arguments, ['key'])
    const file = coerceKey(key)
    const k = file.key
    const sync = this.#synced(options)
    await this.#op(() => this.#files.inShardOf(k, (shard) => shard.unlink(k, { sync }), () => { throw errors.notFound(k) }), {
      write: true,
      file,
      remote: (r) => r.unlink(key, { sync: this.#syncAsked(options) })
    })
  }

  // An async iterable of { key, size, name } for every committed file (lib/data/list.js).
  // `options`: internal (args.SERVED).
  list (shard, options) {
    args.arity('list', arguments, ['shard'], undefined, 'an async iterable')
    if (shard !== undefined) args.shardIndex(shard, this.shardCount)
    return this.#list(shard, args.served(options) && !this.#operations.closed)
  }

  async * #list (only, admitted) {
    await this.#op(() => {}, { remote: () => {} })
    if (only !== undefined) args.shardIndex(only, this.shardCount)
    // Listed through the next holder, or here, if the holder went away before the
    // first file.
    let deadline
    for (;;) {
      if (!this.#reclaimer && !this.#remote) await this.open()
      const holder = this.#remote
      if (!holder) return yield * list(this.#shards, only, this.#operations, { admitted })
      let yielded = false
      try {
        for await (const file of holder.list(only)) {
          if (this.#operations.closed) throw errors.closed()
          yielded = true
          yield file
        }
        return
      } catch (err) {
        if (this.#operations.closed) throw errors.closed()
        deadline = await this.#retried(err, yielded ? NEVER : IDEMPOTENT, holder, deadline)
      }
    }
  }

  async usage () {
    args.arity('usage', arguments, [])
    return this.#op(async () => {
      const shards = []
      for (const index of this.#shards.indices()) {
        const record = await this.#shards.figures(index)
        shards.push({ index, used: record.used, free: this.shardCapacity - record.used, files: record.files, diskBytes: record.diskBytes })
      }
      const used = shards.reduce((sum, s) => sum + s.used, 0)
      const capacity = this.shardCapacity * this.shardCount
      const reserve = await reserveBytes(this.location)
      return { used, free: capacity - used, capacity, files: shards.reduce((sum, s) => sum + s.files, 0), reserve, shards }
    }, { retry: IDEMPOTENT, remote: (r) => r.call('usage') })
  }

  // Bytes of the store's files on disk, leaving out its disk reserve.
  async diskUsage () {
    args.arity('diskUsage', arguments, [])
    return this.#op(() => diskUsage(this.location), { retry: IDEMPOTENT, remote: (r) => r.call('diskUsage') })
  }

  // Gives back now the disk space of files removed or replaced that the store would
  // otherwise reclaim in the background (the reclaim option), in the shards open.
  async reclaim () {
    args.arity('reclaim', arguments, [])
    return this.#op(() => this.#reclaimer.reclaimNow(), { write: true, retry: IDEMPOTENT, remote: (r) => r.call('reclaim') })
  }

  async compact () {
    args.arity('compact', arguments, [])
    return this.#op(() => compact(this.#shards), { write: true, retry: IDEMPOTENT, remote: (r) => r.call('compact') })
  }

  async verify (options) {
    args.arity('verify', arguments, ['options'])
    const checked = args.verifyOptions(options, this.shardCount)
    return this.#op(() => verify(this.#maintenance(), checked), { remote: (r) => r.verify(options) })
  }

  async repair (shard) {
    args.arity('repair', arguments, ['shard'])
    args.shardIndex(shard, this.shardCount)
    return this.#op(() => repair(this.#maintenance(), shard), { write: true, remote: (r) => r.call('repair', shard) })
  }

  // Every caller's promise settles once the store released everything it holds.
  close (...given) {
    const bad = args.arityError('close', given, [])
    if (bad) return Promise.reject(bad)
    return this.#life.close(() => this.#close())
  }

  // Every resource is released even when one fails to close; the first failure is
  // then reported.
  async #close () {
    this.#operations.close()
    this.#streams.destroy()
    const opening = this.#opening
    if (!opening || this.#remote || (await opening.then(() => this.#remote, () => true))) {
      // Used through another process (or never opened): calls in flight end, then any
      // request still open (a listing a caller stopped reading).
      this.#writeBudget.shutdown(errors.closed())
      await this.#operations.drained()
      for (const remote of this.#remotes) remote.close()
      return
    }
    // Other processes' requests the holder accepted end first, their streams with them;
    // it refuses later ones as not carried out, and their clients go to the next holder.
    if (this.#holder) await this.#holder.close()
    // Writes waiting for the write budget fail, like those waiting for a shard: nothing
    // they wait for is certain to come now. (A wait for a memtable flush ends with it.)
    this.#writeBudget.shutdown(errors.closed())
    this.#streams.destroy({ all: true })
    this.#puts.stop()
    await this.#reclaimer.stop()
    this.#shards.shutdown() // operations waiting for a shard fail now, so they drain
    await Promise.all([this.#operations.drained(), this.#streams.closed()])
    const results = await Promise.allSettled([this.#shards.closeAll(), this.#digester.close()])
    results.push(...(await Promise.allSettled([this.#usage.close(), this.#reserve.close()])))
    const failed = results.find((r) => r.status === 'rejected')
    if (failed) throw failed.reason
  }
}

module.exports = { Store }

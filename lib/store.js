'use strict'

const path = require('node:path')
const { parseOptions } = require('./api/options')
const { memoryParts } = require('./api/memory')
const { coerceKey, sha256Of } = require('./api/keys')
const { Operations } = require('./api/operations')
const args = require('./api/args')
const errors = require('./api/errors')
const { Lifecycle } = require('./api/lifecycle')
const { OpenStreams } = require('./api/open-streams')
const { OperationMetrics } = require('./api/metrics')
const { StoreStreams } = require('./store/streams')
const { WriteBudget } = require('./data/write-budget')
const { Backends } = require('./store/backends')

// writeFile hashes data up to this size in one call (larger, chunk by chunk as it goes).
const ONE_CALL_HASH = 1024 * 1024

// The public store. Every method that returns a promise checks its arguments inside
// it, so bad input rejects (EINVAL) and never throws; list() and the stream factories
// throw EINVAL at once, like fs.createReadStream. Everything that needs the disk waits
// for open(), then goes to the store opened here or to the process that holds it
// (store/backends.js).
class Store {
  #options
  #life = new Lifecycle()
  #operations = new Operations()
  #streams = new OpenStreams(() => this.#operations.closed)
  #writeBudget
  #backends
  #counts = new OperationMetrics(() => Boolean(this.#backends.local)) // the calls this store ran, held here (metrics())
  #streamCalls // createWriteStream, createReadStream and list (store/streams.js)

  constructor (dir, options) {
    if (typeof dir !== 'string' || dir === '') throw errors.invalidType('dir', 'a non-empty string', dir)
    const { given, resolved } = parseOptions(options)
    this.location = path.resolve(dir)
    this.#options = resolved
    this.#writeBudget = new WriteBudget(memoryParts(resolved.memory).writes)
    this.#backends = new Backends({
      location: this.location,
      given,
      options: resolved,
      operations: this.#operations,
      streams: this.#streams,
      writeBudget: this.#writeBudget,
      counts: this.#counts,
      served: this
    }, () => this.#life.opened())
    this.#streamCalls = new StoreStreams({
      backends: this.#backends,
      streams: this.#streams,
      counts: this.#counts,
      operations: this.#operations,
      sync: (options) => this.#sync(options),
      writable: () => this.#writable(),
      op: (name, call, how) => this.#op(name, call, how),
      shardCount: () => this.shardCount
    })
  }

  // The store's format, as its backend read it; `fallback` until it opened.
  #format (field, fallback) {
    const format = this.#backends.format
    return format ? format[field] : fallback
  }

  get referenceId () { return this.#format('referenceId') }
  get chunkSize () { return this.#format('chunkSize', this.#options.chunkSize) }
  get shardCapacity () { return this.#format('shardCap') }
  get shardCount () { return this.#format('shardCount', this.#options.shardCount) }

  // The process ID of the process that holds the store, this one or its holder;
  // undefined until open, after close, once the holder went away (until the next call),
  // and where the store is read here read-only (no process holds it).
  get heldBy () {
    const backend = this.#backends.current
    return backend && !this.#operations.closed ? backend.heldBy : undefined
  }

  // Whether this store, as it opened here, took the store over from a holder that ended
  // without closing it (killed, crashed): found by the socket it left (share/server.js), so
  // only the first process to hold the store after it finds so.
  get takenOver () {
    return Boolean(this.#backends.local && this.#backends.local.takenOver)
  }

  // 'opening' until an open succeeded (a failed open is tried again by the next call),
  // then 'open'; 'closing' from close() on, 'closed' once all it holds is released.
  get status () {
    return this.#life.status
  }

  // Idempotent; every method calls it, so calling it yourself only surfaces errors
  // (EBUSY, EINVAL, ENOENT, ECORRUPT, ENOTDIR, ENOTSUP, EROFS, EACCES, EPERM) early.
  open (...given) {
    const bad = args.arityError('open', given, [])
    return bad ? Promise.reject(bad) : this.#backends.open()
  }

  // Runs call(backend), the backend's call `name`, as an operation close() waits for. A
  // write to a store opened read-only is refused (EROFS) before it opens; the errors of
  // `file` (a coerced key) give its name. One async function: each promise between the
  // caller and the call is a turn of the microtask queue, which a small read feels.
  // Counted as the method `counted` (false: not counted).
  async #op (name, call, { write = false, file, counted = name } = {}) {
    const start = performance.now()
    let leave
    let failure
    try {
      leave = this.#operations.enter()
      if (write) this.#writable()
      const local = this.#backends.local
      // On a store open here, the call at once: run() would add a promise.
      return await (local ? call(local) : this.#backends.run(name, call))
    } catch (err) {
      failure = file ? errors.named(err, file) : err
      throw failure
    } finally {
      if (leave) leave()
      if (counted) this.#counts.ended(counted, start, failure)
    }
  }

  // Whether a write must be synced: this store's `sync`, or args.SYNC.
  #sync (options) {
    return this.#options.sync || args.synced(options)
  }

  #writable () {
    if (this.#options.readOnly) throw errors.readOnly(`the store at ${this.location}`, { path: this.location })
  }

  async writeFile (key, data, options) {
    args.arity('writeFile', arguments, args.withOptions(options, ['key', 'data']), typeof options === 'string' ? 'it stores a string as UTF-8 and takes no encoding' : undefined)
    const file = coerceKey(key)
    const buffer = args.toBuffer(data)
    const { expires } = args.fileOptions(options)
    // A small file is hashed in one call, cheaper than a hash object fed chunk by chunk.
    const sha256 = buffer.length <= ONE_CALL_HASH ? sha256Of(buffer) : undefined
    await this.#op('writeFile', (b) => b.writeFile(file, buffer, { sha256, expires, sync: this.#sync() }), { write: true, file })
  }

  async readFile (key, options) {
    args.arity('readFile', arguments, ['key'], typeof options === 'string' || (options && options.encoding) ? 'it resolves to a Buffer: call toString() on it for text' : undefined)
    const file = coerceKey(key)
    const unchecked = Boolean(options && options[args.UNCHECKED])
    return await this.#op('readFile', (b) => b.readFile(file, { unchecked }), { file })
  }

  createWriteStream (key, options) {
    args.arity('createWriteStream', arguments, ['key', 'options'], undefined, 'a stream')
    return this.#streamCalls.createWriteStream(key, options)
  }

  createReadStream (key, options) {
    args.arity('createReadStream', arguments, ['key', 'options'], undefined, 'a stream')
    return this.#streamCalls.createReadStream(key, options)
  }

  // Content addressing: resolves to the key, the SHA-256 of the content; content
  // already stored with the same expiry is not written again. `options`: { expires }, and
  // internal ones (args.SYNC).
  async put (data, options) {
    let expires
    try {
      args.arity('put', arguments, args.withOptions(options, ['data']), 'it stores content under its SHA-256 and resolves to that key; to store data under a key of your own, use writeFile(key, data)')
      expires = args.fileOptions(options).expires
    } catch (err) {
      if (args.isReadable(data)) data.destroy() // as a put that never reads it does
      throw err
    }
    if (args.isReadable(data)) return this.#putStream(data, { expires, sync: this.#sync(options) })
    const buffer = args.toBuffer(data)
    return this.#op('put', (b) => b.put(buffer, { expires, sync: this.#sync(options) }), { write: true })
  }

  // The Readable gets its first 'error' listener only when spooling starts, once the
  // store is open: until then, args.whileGuarded keeps what it emits.
  #putStream (readable, { expires, sync }) {
    return args.whileGuarded(readable, (early) => this.#op('putStream', (b) => {
      early()
      return b.putStream(readable, { expires, sync })
    }, { write: true, counted: 'put' }))
  }

  async exists (key) {
    args.arity('exists', arguments, ['key'])
    const file = coerceKey(key)
    return this.#op('exists', (b) => b.exists(file), { file })
  }

  async stat (key) {
    args.arity('stat', arguments, ['key'])
    const file = coerceKey(key)
    return this.#op('stat', (b) => b.stat(file), { file })
  }

  // `options`: internal (args.SYNC).
  async unlink (key, options) {
    args.arity('unlink', arguments, ['key'])
    const file = coerceKey(key)
    await this.#op('unlink', (b) => b.unlink(file, { sync: this.#sync(options) }), { write: true, file })
  }

  // Puts the file in the trash: readers find no file until restoreTrash(), and emptyTrash()
  // or trashDays remove it for good. ENOENT if readers find none. `options`: internal
  // (args.SYNC).
  async trash (key, options) {
    args.arity('trash', arguments, ['key'])
    const file = coerceKey(key)
    await this.#op('trash', (b) => b.trash(file, { sync: this.#sync(options) }), { write: true, file })
  }

  // Brings back every file in the trash; resolves to { files, bytes } brought back.
  async restoreTrash () {
    args.arity('restoreTrash', arguments, [])
    return this.#op('restoreTrash', (b) => b.restoreTrash(), { write: true })
  }

  // Removes for good the files trashed before `before` (a Date or ms), or without it every
  // file in the trash; resolves to { files, bytes } removed.
  async emptyTrash (options) {
    args.arity('emptyTrash', arguments, ['options'])
    const { before } = args.emptyTrashOptions(options)
    return this.#op('emptyTrash', (b) => b.emptyTrash({ before }), { write: true })
  }

  // An async iterable of { key, size, name } for every committed file (lib/data/list.js).
  list (shard, options) {
    args.arity('list', arguments, ['shard'], undefined, 'an async iterable')
    return this.#streamCalls.list(shard, options)
  }

  async usage () {
    args.arity('usage', arguments, [])
    return this.#op('usage', (b) => b.usage())
  }

  // The figures of the process that holds the store (lib/api/metrics.js, store/local.js):
  // through a holder, the holder's. Not counted as a call itself.
  async metrics () {
    args.arity('metrics', arguments, [])
    return this.#op('metrics', (b) => b.metrics(), { counted: false })
  }

  // Bytes of the store's files on disk, leaving out its disk reserve.
  async diskUsage () {
    args.arity('diskUsage', arguments, [])
    return this.#op('diskUsage', (b) => b.diskUsage())
  }

  // Gives back now, in the shards open, the space of files removed or replaced that the
  // store reclaims in the background (the reclaim option).
  async reclaim () {
    args.arity('reclaim', arguments, [])
    return this.#op('reclaim', (b) => b.reclaim(), { write: true })
  }

  async compact () {
    args.arity('compact', arguments, [])
    return this.#op('compact', (b) => b.compact(), { write: true })
  }

  async verify (options) {
    args.arity('verify', arguments, ['options'])
    const checked = args.verifyOptions(options, this.shardCount)
    return this.#op('verify', (b) => b.verify(checked))
  }

  async repair (shard) {
    args.arity('repair', arguments, ['shard'])
    args.shardIndex(shard, this.shardCount)
    return this.#op('repair', (b) => b.repair(shard), { write: true })
  }

  // Every caller's promise settles once the store released everything it holds.
  close (...given) {
    const bad = args.arityError('close', given, [])
    if (bad) return Promise.reject(bad)
    return this.#life.close(() => this.#close())
  }

  async #close () {
    this.#operations.close()
    this.#streams.destroy()
    const opening = this.#backends.openedHere()
    const local = opening && (await opening)
    if (local) return local.close()
    // Used through another process (or never opened): calls in flight end, then any
    // request still open (a listing a caller stopped reading).
    this.#writeBudget.shutdown(errors.closed())
    await this.#operations.drained()
    this.#backends.closeRemotes()
  }
}

module.exports = { Store }

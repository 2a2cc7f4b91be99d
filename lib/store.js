'use strict'

const fs = require('node:fs')
const path = require('node:path')
const crypto = require('node:crypto')
const { Transform } = require('node:stream')
const { pipeline } = require('node:stream/promises')
const { parseOptions, checkOptionNames } = require('./options')
const { coerceKey, contentHash } = require('./keys')
const { shardFor } = require('./routing')
const { ChunkKeys } = require('./format')
const { Shard } = require('./shard')
const { ShardPool } = require('./shard-pool')
const { ChunkWriter } = require('./chunk-writer')
const { ChunkReader, checkDigest } = require('./chunk-reader')
const { Digester } = require('./digester')
const { LevelDb } = require('./leveldb')
const { checkFile, checkAccounting, rebuild } = require('./shard-check')
const { WriteStream, ReadStream } = require('./streams')
const storeDir = require('./store-dir')
const errors = require('./errors')

// Below this a whole-file read hashes inline: handing chunks to a thread costs more.
const OFFLOAD_DIGEST_BYTES = 4 * 1024 * 1024
// Metadata records read per shard visit by list().
const LIST_PAGE = 1000

// The public store. Arguments are checked synchronously (EINVAL is thrown or, for async
// methods, rejected at once); everything that needs the disk waits for open().
class Store {
  #given
  #options
  #opening
  #closing
  #closed = false
  #active = 0
  #drained = []
  #streams = new Set()
  #spools = new Set() // AbortControllers of put(readable) input being spooled
  // set by #open:
  #format
  #referenceId
  #shardCap
  #shardCount
  #chunkKeys
  #state
  #tmpDir
  #shards // indices of the shards that exist on disk
  #usageCache // index -> { used, files, diskBytes } of closed shards
  #cleaned = new Set() // shards whose abandoned writes were discarded since open
  #repairing = new Set()
  #pool
  #digester = new Digester()

  constructor (dir, options) {
    if (typeof dir !== 'string' || dir === '') throw errors.invalidType('dir', 'a non-empty string', dir)
    const { given, resolved } = parseOptions(options)
    this.location = path.resolve(dir)
    this.#given = given
    this.#options = resolved
  }

  get referenceId () {
    return this.#format && this.#format.referenceId
  }

  get chunkSize () {
    return this.#format ? this.#format.chunkSize : this.#options.chunkSize
  }

  get shardCapacity () {
    return this.#shardCap
  }

  get shardCount () {
    return this.#format ? this.#format.shardCount : this.#options.shardCount
  }

  #route (key) {
    return shardFor(this.#referenceId, key, this.#shardCount)
  }

  // Idempotent; every method calls it, so calling it yourself only surfaces errors
  // (EBUSY, EINVAL, ECORRUPT, ENOTDIR) early.
  // A failed open is not remembered: the next call tries again (after EBUSY, say).
  open () {
    if (this.#closed) return Promise.reject(errors.closed())
    if (!this.#opening) {
      this.#opening = this.#open().catch((err) => {
        this.#opening = undefined
        throw err
      })
    }
    return this.#opening
  }

  async #open () {
    const opened = await storeDir.openStoreDir(this.location, this.#given, this.#options)
    let usage
    try {
      usage = await storeDir.readUsageCache(opened.state)
    } catch (err) {
      await opened.state.close()
      throw errors.corrupt(`the store state at ${this.location}`, err.message, { cause: err })
    }
    const { cache, known } = usage
    this.#format = opened.format
    this.#referenceId = Buffer.from(opened.format.referenceId, 'hex')
    this.#shardCap = opened.format.shardCap
    this.#shardCount = opened.format.shardCount
    this.#chunkKeys = new ChunkKeys(opened.format.shardCap, opened.format.chunkSize)
    this.#state = opened.state
    this.#tmpDir = opened.tmpDir
    this.#shards = new Set([...opened.shards, ...known])
    this.#usageCache = cache
    this.#pool = new ShardPool({
      maxOpen: this.#options.maxOpenShards,
      idleTimeout: this.#options.idleTimeout,
      waitTimeout: this.#options.shardWaitTimeout,
      open: (index) => this.#openShard(index),
      close: (shard) => this.#closeShard(shard)
    })
  }

  async #openShard (index) {
    const create = !this.#shards.has(index)
    const shard = await Shard.open({
      index,
      location: path.join(this.location, storeDir.shardDirName(index)),
      tmpDir: this.#tmpDir,
      cap: this.#shardCap,
      chunkKeys: this.#chunkKeys,
      sync: this.#options.sync,
      create
    })
    try {
      this.#shards.add(index)
      if (!this.#cleaned.has(index)) {
        await shard.discardAbandoned()
        this.#cleaned.add(index)
      }
      this.#usageCache.delete(index)
      await storeDir.writeUsageCache(this.#state, index, { used: shard.used, files: shard.files, diskBytes: 0, open: true })
    } catch (err) {
      await shard.close()
      throw err
    }
    return shard
  }

  async #closeShard (shard) {
    const record = { ...(await shard.figures()), open: false }
    await shard.close()
    await storeDir.writeUsageCache(this.#state, shard.index, record)
    this.#usageCache.set(shard.index, record)
  }

  #acquire (index) {
    if (this.#repairing.has(index)) return Promise.reject(errors.shardBusy(index, 'is being repaired'))
    return this.#pool.acquire(index)
  }

  // Runs fn as a tracked operation: close() waits for it.
  async #op (fn) {
    if (this.#closed) throw errors.closed()
    this.#active++
    try {
      await this.open()
      return await fn()
    } finally {
      if (--this.#active === 0) this.#drained.splice(0).forEach((resolve) => resolve())
    }
  }

  #track (stream) {
    this.#streams.add(stream)
    stream.once('close', () => this.#streams.delete(stream))
    return stream
  }

  // Calls fn(shard) with the key's shard held, or absent() when that shard was never
  // created (so it cannot hold the key).
  async #withShard (key, fn, absent) {
    const index = this.#route(key)
    return this.#shards.has(index) ? this.#inShard(index, fn) : absent()
  }

  async #openWriter ({ key, name }, { size, sha256, expectedSha256 } = {}) {
    const index = this.#route(key)
    const shard = await this.#acquire(index)
    const release = () => this.#pool.release(shard)
    try {
      return new ChunkWriter({ shard, key, name, chunkSize: this.chunkSize, size, sha256, expectedSha256, release })
    } catch (err) {
      release()
      throw err
    }
  }

  async #writeBuffer (target, data, sha256) {
    const writer = await this.#openWriter(target, { size: data.length, sha256 })
    try {
      await writer.write(data)
      return await writer.finish()
    } catch (err) {
      await writer.abort()
      throw err
    }
  }

  async #openReader (key, range, { verify } = {}) {
    const index = this.#route(key)
    if (!this.#shards.has(index)) throw errors.notFound(key)
    const shard = await this.#acquire(index)
    const release = () => this.#pool.release(shard)
    try {
      return await ChunkReader.open({ shard, key, chunkSize: this.chunkSize, range, release, verify })
    } catch (err) {
      release()
      throw err
    }
  }

  async writeFile (key, data) {
    const target = coerceKey(key)
    const buffer = toBuffer(data, 'data')
    await this.#op(() => this.#writeBuffer(target, buffer))
  }

  // Large files are hashed on the Digester's thread while this one copies; each chunk
  // is handed over once copied, so it is never touched twice here.
  async readFile (key) {
    const { key: k } = coerceKey(key)
    return this.#op(async () => {
      const reader = await this.#openReader(k, {}, { verify: false })
      const job = reader.length >= OFFLOAD_DIGEST_BYTES ? this.#digester.begin() : undefined
      const hash = job ? undefined : contentHash()
      try {
        const out = Buffer.allocUnsafe(reader.length)
        let offset = 0
        for (let piece = await reader.read(); piece; piece = await reader.read()) {
          offset += piece.copy(out, offset)
          if (job) this.#digester.update(job, piece)
          else hash.update(piece)
        }
        checkDigest(reader.meta, job ? await this.#digester.finish(job) : hash.digest('hex'))
        return out
      } catch (err) {
        if (job) this.#digester.cancel(job)
        throw err
      } finally {
        await reader.close()
      }
    })
  }

  createWriteStream (key, options = {}) {
    const target = coerceKey(key)
    const expectedSha256 = parseWriteOptions(options)
    return this.#track(new WriteStream(() => {
      if (this.#closed) return Promise.reject(errors.closed())
      return this.open().then(() => this.#openWriter(target, { expectedSha256 }))
    }))
  }

  createReadStream (key, options = {}) {
    const { key: k } = coerceKey(key)
    const range = parseRange(options)
    return this.#track(new ReadStream(() => {
      if (this.#closed) return Promise.reject(errors.closed())
      return this.open().then(() => this.#openReader(k, range))
    }))
  }

  // Content addressing: the key is the SHA-256 of the content; content already stored
  // is not written again.
  async put (data) {
    if (isReadable(data)) return this.#op(() => this.#putStream(data))
    const buffer = toBuffer(data, 'data')
    return this.#op(async () => {
      const sha256 = contentHash().update(buffer).digest('hex')
      if (!(await this.#holds(sha256, buffer.length))) await this.#writeBuffer({ key: sha256 }, buffer, sha256)
      return sha256
    })
  }

  async #holds (sha256, size) {
    const meta = await this.#withShard(sha256, (shard) => shard.getMeta(sha256), () => undefined)
    return Boolean(meta) && meta.sha256 === sha256 && meta.size === size
  }

  // The shard depends on the key, which is known only at the end of the stream, so the
  // stream is spooled to a file in the store's tmp/ while hashing, then copied in.
  async #putStream (readable) {
    const spool = path.join(this.#tmpDir, `put-${crypto.randomBytes(8).toString('hex')}`)
    const hash = contentHash()
    const cap = this.#shardCap
    let size = 0
    const spoolStream = fs.createWriteStream(spool)
    const controller = new AbortController()
    this.#spools.add(controller)
    try {
      await pipeline(readable, new Transform({
        transform (chunk, encoding, callback) {
          size += chunk.length
          if (size > cap) return callback(errors.tooLarge(size, cap))
          hash.update(chunk)
          callback(null, chunk)
        }
      }), spoolStream, { signal: controller.signal }).catch((err) => {
        throw this.#closed ? errors.closed() : err
      })
      const sha256 = hash.digest('hex')
      if (await this.#holds(sha256, size)) return sha256
      const writer = await this.#openWriter({ key: sha256 }, { size, sha256 })
      try {
        for await (const chunk of fs.createReadStream(spool, { highWaterMark: this.chunkSize })) await writer.write(chunk)
        await writer.finish()
      } catch (err) {
        await writer.abort()
        throw err
      }
      return sha256
    } finally {
      this.#spools.delete(controller)
      // On failure the spool may still be opening: remove it only once it is closed.
      if (!spoolStream.closed) await new Promise((resolve) => spoolStream.once('close', resolve))
      await fs.promises.rm(spool, { force: true })
    }
  }

  async exists (key) {
    const { key: k } = coerceKey(key)
    return this.#op(() => this.#withShard(k, async (shard) => Boolean(await shard.getMeta(k)), () => false))
  }

  async stat (key) {
    const { key: k } = coerceKey(key)
    return this.#op(() => this.#withShard(k, async (shard) => {
      const meta = await shard.getMeta(k)
      if (!meta) throw errors.notFound(k)
      const stat = { key: k, size: meta.size, chunks: meta.chunks, shard: shard.index, mtime: new Date(meta.mtime) }
      if (meta.name !== undefined) stat.name = meta.name
      return stat
    }, () => { throw errors.notFound(k) }))
  }

  async unlink (key) {
    const { key: k } = coerceKey(key)
    await this.#op(() => this.#withShard(k, (shard) => shard.unlink(k), () => { throw errors.notFound(k) }))
  }

  // An async iterable of { key, size, name } for every committed file, shard by shard;
  // reads metadata records only, a page at a time, holding no shard between pages (a
  // paused listing must not keep a slot other operations need). A damaged shard does
  // not stop the listing: ECORRUPT comes at the end, naming it.
  list (shardIndex) {
    if (shardIndex !== undefined) checkShardIndex(shardIndex, this.shardCount)
    return this.#list(shardIndex)
  }

  async * #list (shardIndex) {
    await this.#op(() => {})
    const damaged = []
    for (const index of this.#shardIndices().filter((i) => shardIndex === undefined || i === shardIndex)) {
      try {
        for await (const page of this.#metaPages(index)) {
          for (const meta of page) {
            const entry = { key: meta.key, size: meta.size }
            if (meta.name !== undefined) entry.name = meta.name
            yield entry
          }
        }
      } catch (err) {
        if (!errors.isCorrupt(err)) throw err
        damaged.push(err)
      }
    }
    if (damaged.length) throw someCorrupt(damaged, 'listed')
  }

  // The shard's metadata records, a page at a time, holding the shard only while a page
  // is read.
  async * #metaPages (index) {
    let after
    for (;;) {
      const page = await this.#op(() => this.#inShard(index, (shard) => shard.metaPage(after, LIST_PAGE)))
      if (page.length) yield page
      if (page.length < LIST_PAGE) return
      after = page[page.length - 1].key
    }
  }

  #shardIndices () {
    return [...this.#shards].sort((a, b) => a - b)
  }

  async #inShard (index, fn) {
    const shard = await this.#acquire(index)
    try {
      return await fn(shard)
    } finally {
      this.#pool.release(shard)
    }
  }

  // Exact figures from each shard's accounting: live for open shards, cached at close
  // for the others. Only a shard whose cache a crash left stale is opened.
  async usage () {
    return this.#op(async () => {
      const shards = []
      for (const index of this.#shardIndices()) {
        const open = this.#pool.peek(index)
        const record = (open && (await open.figures())) || this.#usageCache.get(index) || (await this.#inShard(index, (shard) => shard.figures()))
        shards.push({ index, used: record.used, free: this.#shardCap - record.used, files: record.files, diskBytes: record.diskBytes })
      }
      const used = shards.reduce((sum, s) => sum + s.used, 0)
      const capacity = this.#shardCap * this.#shardCount
      return { used, free: capacity - used, capacity, files: shards.reduce((sum, s) => sum + s.files, 0), shards }
    })
  }

  // Compacts every shard, which also drops abandoned writes and reclaims the space of
  // removed data (LevelDB only tombstones deletes until compaction).
  async compact () {
    return this.#op(async () => {
      const damaged = []
      for (const index of this.#shardIndices()) {
        try {
          await this.#inShard(index, (shard) => shard.compact())
        } catch (err) {
          if (!errors.isCorrupt(err)) throw err
          damaged.push(err)
        }
      }
      if (damaged.length) throw someCorrupt(damaged, 'compacted')
    })
  }

  // Reads every committed file whole (chunk indexes, lengths, SHA-256) and checks each
  // shard's accounting. Resolves to { files, bytes, problems: [{ shard, key, problem }] }
  // (key null for a shard-wide problem). Holds a shard only while checking one file.
  verify ({ shard, onProgress } = {}) {
    if (shard !== undefined) checkShardIndex(shard, this.shardCount)
    if (onProgress !== undefined && typeof onProgress !== 'function') throw errors.invalidType('onProgress', 'a function', onProgress)
    return this.#op(async () => {
      const report = { files: 0, bytes: 0, problems: [] }
      for (const index of this.#shardIndices().filter((i) => shard === undefined || i === shard)) {
        try {
          for await (const page of this.#metaPages(index)) {
            for (const meta of page) {
              const problem = await this.#inShard(index, (s) => checkFile(s, meta.key, this.chunkSize))
              report.files++
              report.bytes += meta.size
              if (problem) report.problems.push({ shard: index, key: meta.key, problem })
              if (onProgress) onProgress({ shard: index, files: report.files, bytes: report.bytes })
            }
          }
          const problem = await this.#inShard(index, checkAccounting)
          if (problem) report.problems.push({ shard: index, key: null, problem })
        } catch (err) {
          if (!errors.isCorrupt(err) && !errors.isBusy(err)) throw err
          report.problems.push({ shard: index, key: null, problem: err.message })
        }
      }
      return report
    })
  }

  // Runs LevelDB's repair on one shard, then keeps only the files that are whole and
  // rebuilds the shard's accounting. Other shards keep serving; this one answers EBUSY
  // meanwhile. Resolves to { shard, files, used, dropped: [{ key, problem }],
  // unaccounted (files lost without a trace, counted from the last known total),
  // recreated (the shard's directory was gone) }.
  repair (shard) {
    checkShardIndex(shard, this.shardCount)
    return this.#op(async () => {
      if (this.#repairing.has(shard)) throw errors.shardBusy(shard, 'is already being repaired')
      this.#repairing.add(shard)
      try {
        const open = this.#pool.peek(shard)
        const before = open ? open.files : (this.#usageCache.get(shard) || {}).files
        await this.#pool.evict(shard)
        const location = path.join(this.location, storeDir.shardDirName(shard))
        const lost = !fs.existsSync(location)
        if (lost) {
          // Nothing left to repair from: an empty shard lets its keys be written again.
          this.#shards.delete(shard)
          await (await this.#openShard(shard)).close()
        } else {
          await LevelDb.repair(location)
        }
        const db = await LevelDb.open(location)
        let result
        try {
          const repaired = new Shard({ index: shard, location, db, cap: this.#shardCap, chunkKeys: this.#chunkKeys, sync: true, account: { used: 0, files: 0 } })
          result = await rebuild(repaired, this.chunkSize)
        } finally {
          await db.close()
        }
        this.#cleaned.add(shard)
        const record = { used: result.used, files: result.files, diskBytes: 0, open: false }
        await storeDir.writeUsageCache(this.#state, shard, record)
        this.#usageCache.set(shard, record)
        // Files that left no trace at all can only be counted, from the last known total.
        const unaccounted = Math.max(0, (before ?? 0) - result.files - result.dropped.length)
        return { shard, ...result, unaccounted, recreated: lost }
      } finally {
        this.#repairing.delete(shard)
      }
    })
  }

  close () {
    if (!this.#closing) this.#closing = this.#close()
    return this.#closing
  }

  async #close () {
    this.#closed = true
    for (const stream of this.#streams) stream.destroy(errors.closed())
    for (const spool of this.#spools) spool.abort()
    if (!this.#opening) return
    try {
      await this.#opening
    } catch {
      return // never opened: nothing to close
    }
    this.#pool.shutdown() // operations waiting for a shard fail now, so they drain
    const drained = this.#active === 0 ? Promise.resolve() : new Promise((resolve) => this.#drained.push(resolve))
    const streamsClosed = [...this.#streams].map((s) => new Promise((resolve) => s.once('close', resolve)))
    await Promise.all([drained, ...streamsClosed])
    await this.#pool.closeAll()
    await this.#digester.close()
    await this.#state.close()
  }
}

// One ECORRUPT for the damaged shards met by an operation that went on with the others.
function someCorrupt (damaged, done) {
  const shards = damaged.map((err) => err.shard)
  const names = shards.map(errors.shardName).join(', ')
  const reasons = damaged.map((err) => (err.cause ? err.cause.message : err.message)).join('; ')
  return errors.corrupt(`shard${shards.length > 1 ? 's' : ''} ${names}`, `${reasons}; the other shards were ${done}`, { shard: shards[0], shards, cause: damaged[0] })
}

function toBuffer (data, name) {
  if (Buffer.isBuffer(data)) return data
  if (data instanceof Uint8Array) return Buffer.from(data.buffer, data.byteOffset, data.byteLength)
  if (typeof data === 'string') return Buffer.from(data, 'utf8')
  throw errors.invalidType(name, 'a Buffer, Uint8Array or string', data)
}

function isReadable (data) {
  return data !== null && typeof data === 'object' && typeof data.pipe === 'function' && typeof data[Symbol.asyncIterator] === 'function'
}

function parseWriteOptions (options) {
  checkOptionNames(options, ['sha256'])
  if (options.sha256 === undefined) return undefined
  if (typeof options.sha256 !== 'string' || !/^[0-9a-fA-F]{64}$/.test(options.sha256)) throw errors.invalidValue('sha256', 'must be 64 hex characters')
  return options.sha256.toLowerCase()
}

function parseRange (options) {
  const { start = 0, end } = checkOptionNames(options, ['start', 'end'])
  for (const [name, value] of [['start', start], ['end', end]]) {
    if (value === undefined) continue
    if (typeof value !== 'number') throw errors.invalidType(name, 'a number', value)
    if (!Number.isSafeInteger(value) || value < 0) throw errors.invalidValue(name, `must be a non-negative integer, got ${value}`)
  }
  if (end !== undefined && end < start) throw errors.invalidValue('end', `(${end}) must not be less than start (${start})`)
  return { start, end }
}

function checkShardIndex (index, count) {
  if (typeof index !== 'number') throw errors.invalidType('shard', 'a number', index)
  if (!Number.isInteger(index) || index < 0 || index >= count) throw errors.invalidValue('shard', `must be an integer from 0 to ${count - 1}, got ${index}`)
}

module.exports = { Store }

'use strict'

const fs = require('node:fs')
const path = require('node:path')
const { constants: { MAX_LENGTH } } = require('node:buffer')
const { parseOptions } = require('./api/options')
const { coerceKey, contentHash, sha256Of } = require('./api/keys')
const { shardFor } = require('./shard/routing')
const { ChunkKeys, CHUNK_HEADER, chunkIntact } = require('./shard/records')
const { ChunkWriter } = require('./data/chunk-writer')
const { ChunkReader, checkDigest, damagedChunk, UNCHECKED } = require('./data/chunk-reader')
const { Digester } = require('./data/digester')
const { WriteBudget } = require('./data/write-budget')
const { ReadAhead } = require('./data/read-ahead')
const { WriteStream, ReadStream } = require('./data/streams')
const { UsageCache } = require('./dir/usage-cache')
const { Shards } = require('./shard/shards')
const { Reclaimer } = require('./maintenance/reclaimer')
const { spool, remove } = require('./data/spool')
const storeDir = require('./dir/store-dir')
const maintenance = require('./maintenance/maintenance')
const args = require('./api/args')
const errors = require('./api/errors')

// Shards whose first page of metadata list() fetches ahead of the one it yields from.
const LIST_AHEAD = 16
// Below this, put(buffer) and a whole-file read of a format 1 file hash inline: handing
// bytes to a thread costs more.
const OFFLOAD_DIGEST_BYTES = 4 * 1024 * 1024
// Chunks readFile sends to the Digester's thread to check at a time.
const CHECK_BATCH = 8
// readFile's way of saying that the thread checking its chunks failed.
const THREAD_FAILED = Symbol('the digest thread failed')
// writeFile hashes data up to this size in one call (larger, chunk by chunk as it goes).
const ONE_CALL_HASH = 1024 * 1024

// The public store. Every method that returns a promise checks its arguments inside
// it, so bad input rejects (EINVAL) and never throws; list() and the stream factories
// throw EINVAL at once, like fs.createReadStream. Everything that needs the disk waits
// for open().
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
  #putting = new Map() // sha256 -> the turn of the last put() of that content
  #format // set by #open, with:
  #referenceId
  #shards
  #usage
  #reclaimer
  #digester = new Digester()
  #writeBudget = new WriteBudget()
  #readAhead = new ReadAhead()
  #writers = 0 // writes between acquiring their shard and releasing it
  #busyPeriod = 0 // counts the times #writers rose from 0

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
    return this.#format && this.#format.shardCap
  }

  get shardCount () {
    return this.#format ? this.#format.shardCount : this.#options.shardCount
  }

  #route (key) {
    return shardFor(this.#referenceId, key, this.#format.shardCount)
  }

  // Idempotent; every method calls it, so calling it yourself only surfaces errors
  // (EBUSY, EINVAL, ENOENT, ECORRUPT, ENOTDIR, ENOTSUP) early. A failed open is not
  // remembered: the next call tries again (after EBUSY, say).
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
      usage = await UsageCache.load(opened.state, opened.reopenState)
    } catch (err) {
      await opened.state.close().catch(() => {})
      throw err.code ? err : errors.corrupt(`the store state at ${this.location}`, err.message, { cause: err })
    }
    const { format } = opened
    this.#format = format
    this.#referenceId = Buffer.from(format.referenceId, 'hex')
    this.#usage = usage
    this.#shards = new Shards({
      location: this.location,
      tmpDir: opened.tmpDir,
      cap: format.shardCap,
      chunkKeys: new ChunkKeys(format.shardCap, format.chunkSize),
      shardCount: format.shardCount,
      existing: opened.shards,
      usage,
      reserve: opened.reserve,
      options: this.#options
    })
    this.#reclaimer = new Reclaimer({
      openShards: () => this.#shards.openShards(),
      inShard: (index, fn) => this.#op(() => this.#shards.inShard(index, fn)), // never with the reserve
      writing: () => (this.#writers > 0 ? this.#busyPeriod : 0),
      enabled: this.#options.reclaim
    })
    this.#shards.onDead = () => this.#reclaimer.noteDead()
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

  #maintenance () {
    return { shards: this.#shards, chunkSize: this.chunkSize, shardCount: this.shardCount, op: (fn) => this.#op(fn) }
  }

  #track (stream) {
    this.#streams.add(stream)
    stream.once('close', () => this.#streams.delete(stream))
    return stream
  }

  // Calls fn(shard) with the key's shard held, or absent() when that shard was never
  // created (so it cannot hold the key). useReserve: see Shards#acquire.
  #withShard (key, fn, absent, useReserve = true) {
    const index = this.#route(key)
    return this.#shards.has(index) ? this.#shards.inShard(index, fn, { useReserve }) : absent()
  }

  async #openWriter ({ key, name }, { size, sha256, expectedSha256 } = {}) {
    if (this.#writers++ === 0) this.#busyPeriod++
    let shard
    try {
      // Only once the reserve was given up: refused before a shard is created or opened.
      if (this.#shards.reserve.low) await this.#shards.checkRoomForWrites()
      shard = await this.#shards.acquire(this.#route(key))
    } catch (err) {
      this.#writers--
      throw err
    }
    // ChunkWriter calls it once.
    const release = () => {
      this.#writers--
      this.#shards.release(shard)
    }
    try {
      // Asked before every batch: once the reserve is given up, writes in flight stop.
      const mayWrite = () => {
        if (this.#shards.reserve.low) throw this.#shards.noRoomForWrites()
      }
      mayWrite()
      return new ChunkWriter({ shard, key, name, chunkSize: this.chunkSize, size, sha256, expectedSha256, release, mayWrite, budget: this.#writeBudget })
    } catch (err) {
      release()
      throw err
    }
  }

  async #write (target, chunks, { size, sha256 } = {}) {
    const writer = await this.#openWriter(target, { size, sha256 })
    try {
      for await (const chunk of chunks) await writer.write(chunk)
      return await writer.finish()
    } catch (err) {
      await writer.abort()
      throw err
    }
  }

  async #openReader (key, range, { sha256, unchecked } = {}) {
    const index = this.#route(key)
    if (!this.#shards.has(index)) throw errors.notFound(key)
    return this.#shards.withRoom(async () => {
      const shard = await this.#shards.acquire(index, { useReserve: true })
      const share = this.#readAhead.take()
      // ChunkReader calls it once.
      const release = () => {
        share.give()
        this.#shards.release(shard)
      }
      try {
        return await ChunkReader.open({ shard, key, chunkSize: this.chunkSize, range, release, sha256, unchecked, aheadBytes: share.bytes })
      } catch (err) {
        release()
        throw err
      }
    })
  }

  async writeFile (key, data) {
    const target = coerceKey(key)
    const buffer = args.toBuffer(data)
    // A small file is hashed in one call, cheaper than a hash object fed chunk by chunk.
    const sha256 = buffer.length <= ONE_CALL_HASH ? sha256Of(buffer) : undefined
    await this.#op(() => this.#write(target, [buffer], { size: buffer.length, sha256 }))
  }

  async readFile (key, options) {
    const { key: k } = coerceKey(key)
    const unchecked = Boolean(options && options[UNCHECKED])
    return this.#op(async () => {
      for (let offload = true; ; offload = false) {
        // The reader leaves the chunk digests to #readChecked.
        const reader = await this.#openReader(k, {}, { sha256: false, unchecked: true })
        try {
          if (reader.length > MAX_LENGTH) throw errors.tooBigToRead(k, reader.length)
          if (!reader.meta.chunkDigest) return await this.#readFormat1(reader)
          const check = unchecked ? 'no' : offload && reader.length >= OFFLOAD_DIGEST_BYTES ? 'thread' : 'here'
          return await this.#readChecked(reader, check)
        } catch (err) {
          if (err !== THREAD_FAILED) throw err
        } finally {
          await reader.close()
        }
      }
    })
  }

  // Checks every chunk's digest, `check` 'here' or 'thread': on the Digester's thread
  // once copied into place, CHECK_BATCH at a time, while this thread copies the next;
  // nothing is returned before every one matched. Should the thread fail, the records
  // it held are gone: THREAD_FAILED, and readFile reads again, checking here. ('no' is
  // for perf/throughput.js.)
  async #readChecked (reader, check) {
    const out = Buffer.allocUnsafe(reader.length)
    const { shard, meta } = reader
    const checks = []
    let batch = { first: 0, keys: [], records: [] }
    const send = () => {
      const { first, keys, records } = batch
      checks.push(this.#digester.checkChunks(keys, records).then((bad) => (bad === -1 ? -1 : first + bad)))
      checks[checks.length - 1].catch(() => {}) // awaited below
      batch = { first: first + keys.length, keys: [], records: [] }
    }
    let offset = 0
    for (let index = 0, piece = await reader.read(); piece; index++, piece = await reader.read()) {
      // A whole chunk: its record is the data and the header before it.
      const chunkKey = shard.chunkKeys.key(meta.key, meta.version, index)
      const record = Buffer.from(piece.buffer, piece.byteOffset - CHUNK_HEADER, piece.length + CHUNK_HEADER)
      if (check === 'here' && !chunkIntact(chunkKey, record)) throw damagedChunk(meta.key, index)
      offset += piece.copy(out, offset)
      if (check !== 'thread') continue
      batch.keys.push(chunkKey)
      batch.records.push(record)
      if (batch.keys.length === CHECK_BATCH) send()
    }
    if (batch.keys.length) send()
    const bad = (await Promise.all(checks).catch(() => { throw THREAD_FAILED })).find((i) => i !== -1)
    if (bad !== undefined) throw damagedChunk(meta.key, bad)
    return out
  }

  // A file written by format 1 has no chunk digests: its SHA-256 is checked here, for a
  // large file on the Digester's thread while this one copies; each chunk is handed
  // over once copied, so it is never touched twice here. If the thread fails, the copy
  // is hashed here instead.
  async #readFormat1 (reader) {
    const job = reader.length >= OFFLOAD_DIGEST_BYTES ? this.#digester.begin() : undefined
    const hash = job ? undefined : contentHash()
    const out = Buffer.allocUnsafe(reader.length)
    let offset = 0
    try {
      for (let piece = await reader.read(); piece; piece = await reader.read()) {
        offset += piece.copy(out, offset)
        if (job) this.#digester.update(job, piece)
        else hash.update(piece)
      }
    } catch (err) {
      if (job) this.#digester.cancel(job)
      throw err
    }
    const digest = job ? await this.#digester.finish(job).catch(() => contentHash().update(out).digest('hex')) : hash.digest('hex')
    checkDigest(reader.meta, digest)
    return out
  }

  createWriteStream (key, options) {
    const target = coerceKey(key)
    const { sha256: expectedSha256, size } = args.writeOptions(options)
    return this.#track(new WriteStream(() => {
      if (this.#closed) return Promise.reject(errors.closed())
      return this.open().then(() => this.#openWriter(target, { expectedSha256, size }))
    }))
  }

  createReadStream (key, options) {
    const { key: k } = coerceKey(key)
    const range = args.range(options)
    const unchecked = Boolean(options && options[UNCHECKED])
    return this.#track(new ReadStream(() => {
      if (this.#closed) return Promise.reject(errors.closed())
      return this.open().then(() => this.#openReader(k, range, { unchecked }))
    }))
  }

  // Content addressing: the key is the SHA-256 of the content; content already stored
  // (same hash and size) is not written again.
  async put (data) {
    if (args.isReadable(data)) return this.#op(() => this.#putStream(data))
    const buffer = args.toBuffer(data)
    return this.#op(async () => {
      const sha256 = buffer.length >= OFFLOAD_DIGEST_BYTES ? await this.#digester.digestOf(buffer) : sha256Of(buffer)
      await this.#unlessHeld(sha256, buffer.length, () => this.#write({ key: sha256 }, [buffer], { size: buffer.length, sha256 }))
      return sha256
    })
  }

  // Calls write() unless the content is stored. Puts of one content take turns: at
  // once, each would find it missing and write it, every version but the last then
  // dead bytes. Once a put is done, the next finds the content stored (or writes it,
  // if that one failed).
  #unlessHeld (sha256, size, write) {
    const run = (this.#putting.get(sha256) || Promise.resolve()).then(async () => {
      if (!(await this.#holds(sha256, size))) await write()
    })
    const turn = run.catch(() => {})
    this.#putting.set(sha256, turn)
    turn.then(() => this.#putting.get(sha256) === turn && this.#putting.delete(sha256))
    return run
  }

  // A write's own lookup: it never gives up the reserve.
  async #holds (sha256, size) {
    const meta = await this.#withShard(sha256, (shard) => shard.getMeta(sha256), () => undefined, false)
    return Boolean(meta) && meta.sha256 === sha256 && meta.size === size
  }

  async #putStream (readable) {
    const controller = new AbortController()
    this.#spools.add(controller)
    let spooled
    try {
      spooled = await spool(readable, { tmpDir: this.#shards.tmpDir, cap: this.#format.shardCap, signal: controller.signal }).catch((err) => {
        throw this.#closed ? errors.closed() : err
      })
      const { file, size, sha256 } = spooled
      await this.#unlessHeld(sha256, size, async () => {
        const input = fs.createReadStream(file, { highWaterMark: this.chunkSize })
        try {
          await this.#write({ key: sha256 }, input, { size, sha256 })
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

  async exists (key) {
    const { key: k } = coerceKey(key)
    return this.#op(() => this.#withShard(k, async (shard) => Boolean(await shard.getMeta(k)), () => false))
  }

  async stat (key) {
    const { key: k } = coerceKey(key)
    return this.#op(() => this.#withShard(k, async (shard) => {
      const meta = await shard.getMeta(k)
      if (!meta) throw errors.notFound(k)
      const stat = { key: k, size: meta.size, chunks: meta.chunks, shard: shard.index, mtime: new Date(meta.mtime), sha256: meta.sha256 }
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
  // paused listing must not keep a slot other operations need). A shard that fails
  // (damaged, or an OS error) or a damaged record does not stop the listing: one error
  // comes at the end, naming them (maintenance.someFailed).
  list (shard) {
    if (shard !== undefined) args.shardIndex(shard, this.shardCount)
    return this.#list(shard)
  }

  async * #list (only) {
    await this.#op(() => {})
    if (only !== undefined) args.shardIndex(only, this.shardCount)
    const failed = [] // { shard, error }
    const op = (fn) => this.#op(fn)
    const indices = this.#shards.indices().filter((i) => only === undefined || i === only)
    // The first pages of the next shards are fetched ahead, so that opening them (a few
    // milliseconds each) overlaps: they hold no shard once fetched.
    const ahead = new Map()
    const fetchAhead = (n) => {
      if (n >= indices.length || ahead.has(n)) return
      const page = this.#shards.metaPage(indices[n], undefined, op)
      page.catch(() => {}) // met when its turn comes
      ahead.set(n, page)
    }
    for (const [n, index] of indices.entries()) {
      for (let m = n; m < n + LIST_AHEAD; m++) fetchAhead(m)
      const first = ahead.get(n)
      ahead.delete(n)
      try {
        for await (const page of this.#shards.metaPages(index, op, first)) {
          if (this.#closed) throw errors.closed() // a page fetched ahead is not handed out after close()
          for (const meta of page) {
            if (meta.error) {
              failed.push({ shard: index, error: meta.error })
              continue
            }
            const entry = { key: meta.key, size: meta.size }
            if (meta.name !== undefined) entry.name = meta.name
            yield entry
          }
        }
      } catch (err) {
        if (err.code === 'ECLOSED') throw err
        failed.push({ shard: index, error: err })
      }
    }
    const others = indices.some((index) => !failed.some((f) => f.shard === index))
    if (failed.length) throw maintenance.someFailed(failed, 'listed', others)
  }

  async usage () {
    return this.#op(async () => {
      const shards = []
      for (const index of this.#shards.indices()) {
        const record = await this.#shards.figures(index)
        shards.push({ index, used: record.used, free: this.shardCapacity - record.used, files: record.files, diskBytes: record.diskBytes })
      }
      const used = shards.reduce((sum, s) => sum + s.used, 0)
      const capacity = this.shardCapacity * this.shardCount
      return { used, free: capacity - used, capacity, files: shards.reduce((sum, s) => sum + s.files, 0), shards }
    })
  }

  async compact () {
    return this.#op(() => maintenance.compact(this.#maintenance()))
  }

  async verify (options) {
    const checked = args.verifyOptions(options, this.shardCount)
    return this.#op(() => maintenance.verify(this.#maintenance(), checked))
  }

  async repair (shard) {
    args.shardIndex(shard, this.shardCount)
    return this.#op(() => maintenance.repair(this.#maintenance(), shard))
  }

  close () {
    if (!this.#closing) this.#closing = this.#close()
    return this.#closing
  }

  // Every resource is released even when one fails to close; the first failure is
  // then reported.
  async #close () {
    this.#closed = true
    // Writes waiting for memory fail, like those waiting for a shard: nothing they wait
    // for is certain to come now.
    this.#writeBudget.shutdown(errors.closed())
    for (const stream of this.#streams) {
      // A stream that already finished (close() from its 'finish' or 'end' handler) has
      // nothing left to stop: destroying it with an error would only emit that error.
      if (stream.writableFinished || stream.readableEnded) stream.destroy()
      else stream.destroy(errors.closed())
    }
    for (const spooling of this.#spools) spooling.abort()
    if (!this.#opening) return
    try {
      await this.#opening
    } catch {
      return // never opened: nothing to close
    }
    await this.#reclaimer.stop()
    this.#shards.shutdown() // operations waiting for a shard fail now, so they drain
    const drained = this.#active === 0 ? Promise.resolve() : new Promise((resolve) => this.#drained.push(resolve))
    const streamsClosed = [...this.#streams].map((s) => new Promise((resolve) => s.once('close', resolve)))
    await Promise.all([drained, ...streamsClosed])
    const results = await Promise.allSettled([this.#shards.closeAll(), this.#digester.close()])
    results.push(...(await Promise.allSettled([this.#usage.close()])))
    const failed = results.find((r) => r.status === 'rejected')
    if (failed) throw failed.reason
  }
}

module.exports = { Store }

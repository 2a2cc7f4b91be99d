'use strict'

const fs = require('node:fs')
const http = require('node:http')
const path = require('node:path')
const crypto = require('node:crypto')
const { expect } = require('chai')
const kfs = require('..')
const { LevelDb } = require('../lib/leveldb/leveldb')
const { Memtables, MIN_FLUSH, FLUSH_AT, FLOOR, MAX_FLUSHING } = require('../lib/shard/memtables')
const { memoryParts, MEMORY, MIN_MEMORY } = require('../lib/api/memory')
const { ReadAhead } = require('../lib/data/read-ahead')
const binding = require('leveldown/binding')
const { ChunkReader } = require('../lib/data/chunk-reader')
const { ChunkWriter } = require('../lib/data/chunk-writer')
const { SERVED } = require('../lib/api/args')
const { free } = require('../lib/base/freed')
const { useTmp, throws, rejects, scaled } = require('./helpers')

const KiB = 1024
const MiB = 1024 * KiB

// A shard whose LevelDB holds `bytes`; flush() empties it once release() is called.
function fakeShard (name, bytes) {
  const shard = {
    name,
    flushes: 0,
    pending: [],
    fail: false,
    stuck: false,
    db: {
      memoryUsage: () => shard.bytes,
      flush: () => {
        shard.flushes++
        return new Promise((resolve, reject) => shard.pending.push(() => {
          if (shard.fail) return reject(new Error('failed'))
          if (!shard.stuck) shard.bytes = 0 // stuck: as LevelDB keeping a failed write
          resolve()
        }))
      }
    },
    bytes,
    release () {
      for (const end of shard.pending.splice(0)) end()
    }
  }
  return shard
}

const settle = () => new Promise((resolve) => setImmediate(resolve))
// Whether the wait `waiting` ends before the event loop turns: it waits for no flush.
const atOnce = (waiting) => Promise.race([waiting.then(() => true), settle().then(() => false)])

describe('memory budget', () => {
  describe('memtables of all shards held to the budget', () => {
    // A batch written to `shard`, after which its LevelDB holds `bytes`.
    async function write (memtables, shard, bytes) {
      await memtables.wait()
      memtables.begin(shard)
      shard.bytes = bytes
      memtables.wrote(shard)
    }

    it('flushes nothing while under FLUSH_AT of the budget', async () => {
      const memtables = new Memtables({ limit: 10 * MiB })
      const shards = ['a', 'b', 'c'].map((n) => fakeShard(n, 2 * MiB))
      for (const s of shards) memtables.add(s)
      await write(memtables, shards[0], 3 * MiB)
      expect(FLUSH_AT * 10 * MiB).to.be.above(7 * MiB)
      expect(memtables.total).to.equal(7 * MiB)
      expect(shards.map((s) => s.flushes)).to.deep.equal([0, 0, 0])
    })

    it('past FLUSH_AT flushes the fullest shard while writes go on; past the budget a write waits for the flush', async () => {
      const memtables = new Memtables({ limit: 10 * MiB })
      const [a, b, c] = [fakeShard('a', 2 * MiB), fakeShard('b', 4 * MiB), fakeShard('c', 1 * MiB)]
      for (const s of [a, b, c]) memtables.add(s)
      await write(memtables, c, 2 * MiB) // 8 MiB held
      expect([a.flushes, b.flushes, c.flushes]).to.deep.equal([0, 1, 0])
      await write(memtables, a, 5 * MiB) // 11 MiB: over the budget, 7 once b is flushed
      expect([a.flushes, b.flushes, c.flushes]).to.deep.equal([0, 1, 0])
      let passed = false
      const waiting = memtables.wait().then(() => { passed = true })
      await settle()
      expect(passed).to.equal(false)
      b.release()
      await waiting
      expect(await atOnce(memtables.wait())).to.equal(true)
      expect(memtables.total).to.equal(7 * MiB)
      expect(memtables.flushes).to.equal(1)
    })

    it('a waiting write goes on once the end of a batch finds the memtables back under the budget, before the flush in flight ends', async () => {
      const memtables = new Memtables({ limit: 4 * MiB })
      const [a, b] = [fakeShard('a', 1.5 * MiB), fakeShard('b', 3 * MiB)]
      memtables.add(a)
      memtables.add(b) // 4.5 MiB: b flushed, and a write waits
      expect(b.flushes).to.equal(1)
      let passed = false
      const waiting = memtables.wait().then(() => { passed = true })
      await settle()
      expect(passed).to.equal(false)
      memtables.begin(a)
      a.bytes = 0 // LevelDB flushed a on its own: 3 MiB held, under the budget
      memtables.wrote(a)
      await settle()
      expect(passed, 'the wait ended with b\'s flush still in flight').to.equal(true)
      expect(b.pending.length).to.equal(1)
      b.release()
      await waiting
    })

    it('flushes idle shards before one being written, however full', async () => {
      const memtables = new Memtables({ limit: 8 * MiB })
      const [a, b, c] = [fakeShard('a', 4 * MiB), fakeShard('b', 2 * MiB), fakeShard('c', 1 * MiB)]
      memtables.add(a)
      memtables.begin(a) // a batch to a, in flight
      memtables.add(b)
      memtables.add(c) // 7 MiB held: b, idle, goes
      expect([a.flushes, b.flushes, c.flushes]).to.deep.equal([0, 1, 0])
      b.release()
      await settle()
      // No idle shard holds enough to be worth a flush: the one being written goes.
      await write(memtables, c, MIN_FLUSH - 1)
      memtables.begin(a) // a second batch to a, the first still in flight
      a.bytes = 7 * MiB
      memtables.wrote(a)
      expect([a.flushes, b.flushes, c.flushes]).to.deep.equal([1, 1, 0])
      a.release()
      memtables.wrote(a)
      await settle()
      expect(memtables.total).to.equal(MIN_FLUSH - 1)
    })

    it('asks for at most MAX_FLUSHING flushes at a time, and goes on until back under FLUSH_AT, counting what writers and readers hold', async () => {
      let others = 0
      const memtables = new Memtables({ limit: 8 * MiB, others: () => others })
      const shards = Array.from({ length: 8 }, (_, i) => fakeShard(String(i), 0.5 * MiB))
      for (const s of shards) memtables.add(s)
      others = 4 * MiB // the memtables may hold 4 MiB now, and flushing starts past 3
      await write(memtables, shards[0], 1 * MiB) // 4.5 MiB held
      const flushing = () => shards.filter((s) => s.pending.length > 0)
      expect(flushing().length).to.equal(MAX_FLUSHING)
      expect(shards[0].flushes).to.equal(0) // being written while the flushes were chosen
      for (let round = 0; round < 4 && flushing().length > 0; round++) {
        expect(flushing().length).to.be.at.most(MAX_FLUSHING)
        for (const s of flushing()) s.release()
        await settle()
      }
      expect(memtables.total).to.be.at.most(FLUSH_AT * (8 * MiB - others))
      expect(memtables.flushes).to.equal(3) // two of 0.5 MiB, then the fullest, idle by then
      expect(shards[0].flushes).to.equal(1)
    })

    it('a write goes on when no flush can help: memtables too small to be worth one', async () => {
      const memtables = new Memtables({ limit: 1 * MiB })
      const shards = Array.from({ length: 20 }, (_, i) => fakeShard(String(i), MIN_FLUSH - 1))
      for (const s of shards) memtables.add(s)
      expect(memtables.total).to.be.above(1 * MiB)
      const waiting = memtables.wait()
      expect(waiting).to.be.an.instanceOf(Promise) // a wait is a promise, with or without a flush
      expect(await atOnce(waiting)).to.equal(true)
      expect(shards.every((s) => s.flushes === 0)).to.equal(true)
    })

    it('leaves the memtables a quarter of the budget however much writers and readers hold', async () => {
      const memtables = new Memtables({ limit: 8 * MiB, others: () => 16 * MiB })
      const [a, b] = [fakeShard('a', 1 * MiB), fakeShard('b', 0.5 * MiB)]
      memtables.add(a)
      memtables.add(b)
      expect([a.flushes, b.flushes]).to.deep.equal([0, 0]) // 1.5 MiB: under 3/4 of a quarter
      await write(memtables, b, 1 * MiB) // 2 MiB: past it
      expect([a.flushes, b.flushes]).to.deep.equal([1, 0])
      expect(FLOOR).to.equal(0.25)
    })

    it('skips a shard being compacted, whose flush would wait for the compaction', async () => {
      const memtables = new Memtables({ limit: 4 * MiB })
      const [a, b] = [fakeShard('a', 3 * MiB), fakeShard('b', 1 * MiB)]
      a.compacting = 1
      memtables.add(a)
      memtables.add(b)
      expect([a.flushes, b.flushes]).to.deep.equal([0, 1])
    })

    for (const how of ['fails', 'frees nothing']) {
      it(`does not flush again a shard whose flush ${how} until a batch to it succeeds, nor one flushing`, async () => {
        const memtables = new Memtables({ limit: 4 * MiB })
        const a = fakeShard('a', 5 * MiB)
        if (how === 'fails') a.fail = true
        else a.stuck = true
        memtables.add(a)
        expect(a.flushes).to.equal(1)
        const waiting = memtables.wait() // over the budget: waits for the flush
        memtables.begin(a)
        memtables.wrote(a, how === 'fails') // an earlier batch ends meanwhile: a is flushing already
        expect(a.flushes).to.equal(1)
        a.release()
        await waiting // the flush ended: nothing is in flight, writes go on
        expect(await atOnce(memtables.wait())).to.equal(true)
        memtables.begin(a)
        memtables.wrote(a, false) // a batch that failed
        expect(a.flushes).to.equal(1)
        a.fail = a.stuck = false
        await write(memtables, a, 5 * MiB) // written again: it may be flushed
        expect(a.flushes).to.equal(2)
        a.release()
        await settle()
        expect(memtables.total).to.equal(0)
      })
    }

    it('a flush that freed nothing while batches to the shard succeeded is asked for again', async () => {
      const memtables = new Memtables({ limit: 4 * MiB })
      const a = fakeShard('a', 5 * MiB)
      a.stuck = true // the writes meanwhile refilled what the flush freed
      memtables.add(a)
      memtables.begin(a)
      memtables.wrote(a)
      a.release()
      await settle()
      expect(a.flushes).to.equal(2)
    })

    it('counts a shard with a file being written to it as written, between its batches too', async () => {
      const memtables = new Memtables({ limit: 8 * MiB })
      const [a, b] = [fakeShard('a', 4 * MiB), fakeShard('b', 1 * MiB)]
      a.writing = new Set(['a version'])
      memtables.add(a)
      memtables.add(b)
      await write(memtables, b, 1.75 * MiB)
      expect([a.flushes, b.flushes]).to.deep.equal([0, 0])
      memtables.add(fakeShard('c', 0.5 * MiB)) // past 6 MiB: b goes, though a holds more
      expect([a.flushes, b.flushes]).to.deep.equal([0, 1])
    })

    // A close to end when the test says: { closed, end }.
    function closeHeld () {
      let end
      const closed = new Promise((resolve) => { end = resolve })
      return { closed, end }
    }

    it('a shard closing stays counted until its close ends, and is not flushed for the budget meanwhile', async () => {
      const memtables = new Memtables({ limit: 4 * MiB })
      const [a, b] = [fakeShard('a', 3 * MiB), fakeShard('b', 2 * MiB)]
      memtables.add(a)
      const close = closeHeld()
      memtables.closing(a, close.closed)
      memtables.add(b) // 5 MiB: past the budget, 2 once a is closed
      expect([a.flushes, b.flushes]).to.deep.equal([0, 0])
      let passed = false
      const waiting = memtables.wait().then(() => { passed = true })
      await settle()
      expect(passed).to.equal(false)
      expect(memtables.total).to.equal(5 * MiB)
      close.end()
      await waiting
      expect(memtables.total).to.equal(2 * MiB)
      expect(await atOnce(memtables.wait())).to.equal(true)
    })

    it('a shard closing while flushed for the budget stays counted until both end', async () => {
      const memtables = new Memtables({ limit: 4 * MiB })
      const [a, b] = [fakeShard('a', 3 * MiB), fakeShard('b', 2 * MiB)]
      memtables.add(a)
      memtables.add(b)
      expect(a.flushes).to.equal(1)
      const close = closeHeld()
      memtables.closing(a, close.closed)
      const waiting = memtables.wait()
      a.release() // its flush ended, its close not yet
      await settle()
      expect(memtables.total).to.equal(5 * MiB)
      memtables.begin(a)
      memtables.wrote(a) // a batch in flight when the close began: a is not read again
      expect(memtables.total).to.equal(5 * MiB)
      expect(a.flushes).to.equal(1)
      close.end()
      await waiting
      expect(memtables.total).to.equal(2 * MiB)
    })
  })

  describe('the budget shared out', () => {
    it('gives writers and readers a quarter each', () => {
      expect(memoryParts(MEMORY)).to.deep.equal({ writes: MEMORY / 4, readAhead: MEMORY / 4 })
    })

    it('refuses a budget below the least, or not a number', () => {
      throws(() => kfs('/nonexistent', { memory: MIN_MEMORY - 1 }), 'EINVAL')
      throws(() => kfs('/nonexistent', { memory: '64M' }), 'EINVAL')
    })
  })

  describe('a store', () => {
    const t = useTmp()

    // Tables written since the shards were made (a new shard holds one, create.js).
    const flushed = (store) => {
      const shards = fs.readdirSync(store.location).filter((d) => d.endsWith('.s'))
      const tables = shards.flatMap((d) => fs.readdirSync(path.join(store.location, d)).filter((f) => f.endsWith('.ldb')))
      return tables.length - shards.length
    }

    // Without the budget, 48 MiB spread over 256 shards stays in their memtables (4 MiB
    // each) until the shards close.
    it('flushes shards while open once what they were written passes its budget', async () => {
      const store = t.open({ memory: MIN_MEMORY })
      const data = crypto.randomBytes(192 * KiB)
      for (let i = 0; i < 256; i++) await store.writeFile(`file ${i}`, data)
      expect(flushed(store)).to.be.at.least(16)
      for (let i = 0; i < 256; i += 37) expect((await store.readFile(`file ${i}`)).equals(data)).to.equal(true)
    })

    // The binding copies a batch when it is made: the head record that carries a small
    // file's data is not left for V8 to collect.
    it('gives back a small file\'s head record once its batch is written, and the file reads back whole', async () => {
      const store = t.open()
      const data = crypto.randomBytes(8 * KiB)
      const heads = []
      const { batch } = LevelDb.prototype
      LevelDb.prototype.batch = function (ops, options) {
        for (const op of ops) if (op.type === 'put' && op.value.length > data.length) heads.push(op.value) // the file's head
        return batch.call(this, ops, options)
      }
      try {
        await store.writeFile('piece', data)
      } finally {
        LevelDb.prototype.batch = batch
      }
      expect(heads.map((h) => h.length)).to.deep.equal([0])
      expect((await store.readFile('piece')).equals(data)).to.equal(true)
    })

    // Writes wait for flushes here: the chunk records a batch was built from must not be
    // reused before LevelDB took them.
    it('files written at once under the least budget, waiting for flushes, all read back whole', async function () {
      this.timeout(scaled(120000))
      const store = t.open({ memory: MIN_MEMORY })
      const files = Array.from({ length: 24 }, (_, i) => ({ key: `big ${i}`, data: crypto.randomBytes(3 * MiB + i * 4099) }))
      await Promise.all(files.map((f) => store.writeFile(f.key, f.data)))
      expect(flushed(store)).to.be.above(0)
      for (const f of files) expect((await store.readFile(f.key)).equals(f.data), f.key).to.equal(true)
    })

    // The memtables' wait held open by the test: a flush that takes long.
    function holdWaits () {
      const real = Memtables.prototype.wait
      let release
      const held = new Promise((resolve) => { release = resolve })
      let waiting = 0
      Memtables.prototype.wait = function () { waiting++; return held }
      return { waiting: () => waiting, release: () => { Memtables.prototype.wait = real; release() } }
    }

    for (const size of [100, 3 * MiB]) {
      it(`a stream of ${size} bytes destroyed while its write waits for a flush is not committed`, async () => {
        const store = t.open()
        await store.writeFile('other', 'x') // the shards are open
        const hold = holdWaits()
        try {
          const ws = store.createWriteStream('destroyed')
          ws.end(crypto.randomBytes(size))
          while (hold.waiting() === 0) await new Promise((resolve) => setTimeout(resolve, 5))
          const closed = new Promise((resolve) => ws.once('close', resolve))
          ws.destroy()
          hold.release()
          await closed
        } finally {
          hold.release()
        }
        await rejects(store.readFile('destroyed'), 'ENOENT')
        expect((await store.usage()).files).to.equal(1)
      })
    }

    // LevelDB frees a shard's memtable once its close ended: counted out sooner, the
    // budget would admit new writes into memory it still holds.
    it('counts a closing shard\'s memtable until its LevelDB is closed', async () => {
      const store = t.open({ shardCount: 1 })
      const add = Memtables.prototype.add
      let memtables
      Memtables.prototype.add = function (shard) {
        memtables = this
        return add.call(this, shard)
      }
      const close = LevelDb.prototype.close
      let closing = 0
      let end
      const ended = new Promise((resolve) => { end = resolve })
      try {
        await store.writeFile('file', crypto.randomBytes(MiB))
        Memtables.prototype.add = add
        LevelDb.prototype.close = async function () {
          closing++
          await ended
          return close.call(this)
        }
        const held = memtables.total
        expect(held).to.be.above(MiB)
        const closed = store.close()
        while (closing === 0) await settle()
        expect(memtables.total).to.equal(held)
        end()
        await closed
        expect(memtables.total).to.equal(0)
      } finally {
        Memtables.prototype.add = add
        LevelDb.prototype.close = close
        end()
      }
    })

    // The chunk records readers hold, counted where the binding hands them out: each
    // trip's values, of which the binding keeps its copy until its iterator's next trip
    // or end. held(): those of the last trips, and those handed out that no consumer
    // took yet.
    function countTrips () {
      const { iterator_next: next, iterator_end: end } = binding
      const last = new Map() // iterator context -> chunks of its last trip
      let fetched = 0
      const chunks = (array) => array.filter((v, i) => i % 2 === 0 && v && v.length > 64 * KiB).length
      binding.iterator_next = (context, callback) => next(context, (err, array, finished) => {
        if (!err) {
          last.set(context, chunks(array))
          fetched += chunks(array)
        }
        callback(err, array, finished)
      })
      binding.iterator_end = (context, callback) => {
        last.delete(context)
        return end(context, callback)
      }
      return {
        held: (taken) => fetched - taken + [...last.values()].reduce((a, b) => a + b, 0),
        restore: () => Object.assign(binding, { iterator_next: next, iterator_end: end })
      }
    }

    it('slow readers hold no more than their read-ahead shares, the binding\'s copies counted', async function () {
      this.timeout(scaled(60000))
      const store = t.open({ memory: MIN_MEMORY })
      const chunkSize = 128 * KiB
      await store.writeFile('big', crypto.randomBytes(16 * chunkSize)) // longer than any share
      const readers = 24
      const readAhead = new ReadAhead(memoryParts(MIN_MEMORY).readAhead) // the shares they get
      const shares = Array.from({ length: readers }, () => Math.max(2, Math.floor(readAhead.take().bytes / chunkSize)))
      const trips = countTrips()
      let taken = 0
      const streams = []
      try {
        for (let i = 0; i < readers; i++) {
          const stream = store.createReadStream('big')
          streams.push(stream)
          await new Promise((resolve, reject) => {
            stream.once('data', () => {
              taken++
              stream.pause()
              resolve()
            })
            stream.once('error', reject)
          })
        }
        // Until every reader has fetched all it will while paused.
        let seen
        for (let quiet = 0; quiet < 10; quiet = trips.held(taken) === seen ? quiet + 1 : 0) {
          seen = trips.held(taken)
          await new Promise((resolve) => setTimeout(resolve, scaled(20)))
        }
        expect(seen).to.be.at.most(shares.reduce((a, b) => a + b, 0))
        expect(seen).to.be.at.least(readers) // each fetched ahead
      } finally {
        trips.restore()
        for (const stream of streams) stream.destroy()
      }
    })

    // Calls of Class.prototype[method], each one's `pick(args, result)` recorded.
    function spy (Class, method, pick) {
      const real = Class.prototype[method]
      const seen = []
      Class.prototype[method] = async function (...args) {
        const result = await real.apply(this, args)
        seen.push(pick(args, result))
        return result
      }
      return { seen, restore: () => { Class.prototype[method] = real } }
    }

    it('a holder frees each chunk it sent once the socket wrote it, and each piece of a body once it was copied', async function () {
      this.timeout(scaled(60000))
      const { Holder } = require('../lib/share/server')
      const store = t.open({ share: false })
      const data = crypto.randomBytes(2 * MiB + 5)
      await store.writeFile('a', data)
      const holding = new Holder(store, store.location)
      expect(await holding.listen(path.join(store.location, 'tmp'))).to.equal(true)
      const socketPath = path.join(store.location, 'kfs.sock')
      const read = spy(ChunkReader, 'read', (args, chunk) => chunk)
      const written = spy(ChunkWriter, 'write', ([piece]) => piece)
      try {
        const got = await new Promise((resolve, reject) => {
          http.get({ socketPath, path: '/v1/files/a' }, (res) => {
            const parts = []
            res.on('data', (part) => parts.push(part)).on('end', () => resolve(Buffer.concat(parts))).on('error', reject)
          }).on('error', reject)
        })
        expect(got.equals(data)).to.equal(true)
        const chunks = read.seen.filter(Boolean)
        expect(chunks.length).to.equal(17)
        expect(chunks.slice(0, 16).map((chunk) => chunk.length), 'every chunk sent was freed').to.deep.equal(Array(16).fill(0))
        expect(chunks[16].length).to.equal(5) // a record smaller than Node's pool: left to the collector
        const answer = await new Promise((resolve, reject) => {
          const req = http.request({ socketPath, method: 'PUT', path: '/v1/files/b' }, (res) => {
            const parts = []
            res.on('data', (part) => parts.push(part)).on('end', () => resolve(JSON.parse(Buffer.concat(parts)))).on('error', reject)
          }).on('error', reject)
          for (let at = 0; at < data.length; at += 64 * KiB) req.write(data.subarray(at, at + 64 * KiB))
          req.end()
        })
        expect(answer.result.size).to.equal(data.length)
        const large = written.seen.filter((piece) => piece.buffer.byteLength > Buffer.poolSize || piece.length === 0)
        expect(large.length).to.be.at.least(16)
        expect(large.every((piece) => piece.length === 0), 'every piece of the body was freed').to.equal(true)
        expect((await store.readFile('b')).equals(data)).to.equal(true)
      } finally {
        read.restore()
        written.restore()
        await holding.close()
      }
    })

    it('a write stream of the store\'s own caller leaves the caller\'s buffers as they were; a served one frees them once copied', async () => {
      const store = t.open()
      const pieces = [crypto.randomBytes(64 * KiB), crypto.randomBytes(64 * KiB)]
      const copies = pieces.map((piece) => Buffer.from(piece))
      await new Promise((resolve, reject) => store.createWriteStream('own').on('finish', resolve).on('error', reject).end(Buffer.concat(pieces)))
      for (const piece of pieces) {
        await new Promise((resolve, reject) => {
          const stream = store.createWriteStream('piece').on('error', reject)
          stream.end(piece, resolve)
        })
      }
      expect(pieces.map((piece, i) => piece.equals(copies[i]))).to.deep.equal([true, true])
      const served = Buffer.from(copies[0])
      await new Promise((resolve, reject) => store.createWriteStream('served', { [SERVED]: true }).on('error', reject).end(served, resolve))
      expect(served.length).to.equal(0)
      expect((await store.readFile('served')).equals(copies[0])).to.equal(true)
    })

    it('free() gives back a Buffer\'s memory now, and leaves alone one of Node\'s shared pool', () => {
      const big = Buffer.alloc(MiB, 1)
      free(big)
      expect(big.length).to.equal(0)
      const small = Buffer.from('small')
      const neighbour = Buffer.from('neighbour') // in the same pool
      free(small)
      expect(String(small) + String(neighbour)).to.equal('smallneighbour')
    })

    it('flushes none while what was written fits its budget', async () => {
      const store = t.open()
      const data = crypto.randomBytes(192 * KiB)
      for (let i = 0; i < 256; i++) await store.writeFile(`file ${i}`, data)
      expect(flushed(store)).to.equal(0)
    })
  })
})

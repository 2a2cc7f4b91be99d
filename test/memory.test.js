'use strict'

const fs = require('node:fs')
const path = require('node:path')
const crypto = require('node:crypto')
const { expect } = require('chai')
const kfs = require('..')
const { Memtables, MIN_FLUSH, FLUSH_AT, MAX_FLUSHING } = require('../lib/shard/memtables')
const { memoryParts, cacheEach, MEMORY, MIN_MEMORY } = require('../lib/api/memory')
const { useTmp, throws } = require('./helpers')

const KiB = 1024
const MiB = 1024 * KiB

// A shard whose LevelDB holds `bytes`; flush() empties it once release() is called.
function fakeShard (name, bytes) {
  const shard = {
    name,
    flushes: 0,
    pending: [],
    fail: false,
    db: {
      memoryUsage: () => shard.bytes,
      flush: () => {
        shard.flushes++
        return new Promise((resolve, reject) => shard.pending.push(() => {
          if (shard.fail) return reject(new Error('failed'))
          shard.bytes = 0
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

describe('memory budget', () => {
  describe('memtables of all shards held to the budget', () => {
    // A batch written to `shard`, after which its LevelDB holds `bytes`.
    async function write (memtables, shard, bytes) {
      await memtables.room(shard)
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
      const waiting = memtables.room(c).then(() => { passed = true })
      await settle()
      expect(passed).to.equal(false)
      b.release()
      await waiting
      memtables.wrote(c)
      expect(memtables.total).to.equal(7 * MiB)
      expect(memtables.flushes).to.equal(1)
    })

    it('flushes idle shards before one being written, however full', async () => {
      const memtables = new Memtables({ limit: 8 * MiB })
      const [a, b, c] = [fakeShard('a', 4 * MiB), fakeShard('b', 2 * MiB), fakeShard('c', 1 * MiB)]
      memtables.add(a)
      await memtables.room(a) // a batch to a, in flight
      memtables.add(b)
      memtables.add(c) // 7 MiB held: b, idle, goes
      expect([a.flushes, b.flushes, c.flushes]).to.deep.equal([0, 1, 0])
      b.release()
      await settle()
      // No idle shard holds enough to be worth a flush: the one being written goes.
      await write(memtables, c, MIN_FLUSH - 1)
      await memtables.room(a) // a second batch to a, the first still in flight
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
      others = 4 * MiB
      await write(memtables, shards[0], 1 * MiB) // 8.5 MiB held
      const flushing = () => shards.filter((s) => s.pending.length > 0)
      expect(flushing().length).to.equal(MAX_FLUSHING)
      expect(shards[0].flushes).to.equal(1) // the fullest first
      for (let round = 0; round < 4 && flushing().length > 0; round++) {
        expect(flushing().length).to.be.at.most(MAX_FLUSHING)
        for (const s of flushing()) s.release()
        await settle()
      }
      expect(memtables.total + others).to.be.at.most(FLUSH_AT * 8 * MiB)
      expect(memtables.flushes).to.equal(4)
    })

    it('a write goes on when no flush can help: memtables too small, or the budget held by writers and readers', async () => {
      const memtables = new Memtables({ limit: 1 * MiB, others: () => 2 * MiB })
      const small = fakeShard('small', MIN_FLUSH - 1)
      memtables.add(small)
      await write(memtables, small, MIN_FLUSH - 1)
      expect(small.flushes).to.equal(0)
    })

    it('does not flush again a shard whose flush failed until it was written, nor one flushing', async () => {
      const memtables = new Memtables({ limit: 4 * MiB })
      const a = fakeShard('a', 5 * MiB)
      a.fail = true
      memtables.add(a)
      expect(a.flushes).to.equal(1)
      const waiting = memtables.room(a) // over the budget: waits for the flush
      memtables.wrote(a) // an earlier batch ends meanwhile: a is flushing already
      expect(a.flushes).to.equal(1)
      a.release()
      await waiting // the flush failed: nothing is in flight, the write goes on
      memtables.wrote(a, false) // and fails too
      await settle()
      expect(a.flushes).to.equal(1)
      await memtables.room(a)
      memtables.wrote(a, false)
      expect(a.flushes).to.equal(1)
      a.fail = false
      await write(memtables, a, 5 * MiB) // written again: it may be flushed
      expect(a.flushes).to.equal(2)
      a.release()
      await settle()
      expect(memtables.total).to.equal(0)
    })

    it('a shard closing leaves the count, and a write waiting on its flush goes on', async () => {
      const memtables = new Memtables({ limit: 4 * MiB })
      const [a, b] = [fakeShard('a', 3 * MiB), fakeShard('b', 2 * MiB)]
      memtables.add(a)
      memtables.add(b)
      expect(a.flushes).to.equal(1)
      const waiting = memtables.room(b)
      memtables.remove(a)
      await waiting
      memtables.wrote(b)
      expect(memtables.total).to.equal(2 * MiB)
      a.release()
      await settle()
      expect(memtables.total).to.equal(2 * MiB)
    })
  })

  describe('the budget shared out', () => {
    it('gives writers and readers a quarter each, and each open shard a block cache from a sixteenth', () => {
      expect(memoryParts(MEMORY)).to.deep.equal({ writes: MEMORY / 4, readAhead: MEMORY / 4 })
      expect(cacheEach(MEMORY, 256)).to.equal(MEMORY / 16 / 256)
      expect(cacheEach(MEMORY, 1)).to.equal(8 * MiB) // LevelDB's default, for one shard
      expect(cacheEach(MIN_MEMORY, 256)).to.equal(32 * KiB)
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

    it('flushes none while what was written fits its budget', async () => {
      const store = t.open()
      const data = crypto.randomBytes(192 * KiB)
      for (let i = 0; i < 256; i++) await store.writeFile(`file ${i}`, data)
      expect(flushed(store)).to.equal(0)
    })
  })
})

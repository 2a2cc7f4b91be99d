'use strict'

const fs = require('node:fs')
const path = require('node:path')
const crypto = require('node:crypto')
const { expect } = require('chai')
const kfs = require('..')
const { Memtables, MIN_FLUSH } = require('../lib/shard/memtables')
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
    it('flushes nothing while under the budget', async () => {
      const memtables = new Memtables({ limit: 10 * MiB })
      const shards = ['a', 'b', 'c'].map((n) => fakeShard(n, 3 * MiB))
      for (const s of shards) memtables.add(s)
      expect(memtables.total).to.equal(9 * MiB)
      await memtables.room()
      expect(shards.map((s) => s.flushes)).to.deep.equal([0, 0, 0])
    })

    it('past the budget flushes the fullest shard, and a write waits for that flush', async () => {
      const memtables = new Memtables({ limit: 10 * MiB })
      const [a, b, c] = [fakeShard('a', 2 * MiB), fakeShard('b', 5 * MiB), fakeShard('c', 3 * MiB)]
      for (const s of [a, b, c]) memtables.add(s)
      a.bytes = 3 * MiB // a write to a
      memtables.wrote(a)
      expect([a.flushes, b.flushes, c.flushes]).to.deep.equal([0, 1, 0])
      let passed = false
      const waiting = memtables.room().then(() => { passed = true })
      await settle()
      expect(passed).to.equal(false)
      b.release()
      await waiting
      expect(memtables.total).to.equal(6 * MiB)
      expect(memtables.flushes).to.equal(1)
    })

    it('flushes as many shards as it takes to come back under, counting what the writers and readers hold', async () => {
      let others = 0
      const memtables = new Memtables({ limit: 8 * MiB, others: () => others })
      const shards = Array.from({ length: 8 }, (_, i) => fakeShard(String(i), MiB))
      for (const s of shards) memtables.add(s)
      expect(shards.every((s) => s.flushes === 0)).to.equal(true)
      others = 3 * MiB
      shards[0].bytes += 64 * KiB
      memtables.wrote(shards[0])
      // 11 MiB + 64 KiB held: three memtables leave, the written one first.
      expect(shards.filter((s) => s.flushes === 1).length).to.equal(3)
      expect(shards[0].flushes).to.equal(1)
      for (const s of shards) s.release()
      await memtables.room()
      expect(memtables.total).to.equal(5 * MiB)
    })

    it('a write goes on when no flush can help: memtables too small, or the budget held by writers and readers', async () => {
      const memtables = new Memtables({ limit: 1 * MiB, others: () => 2 * MiB })
      const small = fakeShard('small', MIN_FLUSH - 1)
      memtables.add(small)
      await memtables.room()
      expect(small.flushes).to.equal(0)
    })

    it('does not flush again a shard whose flush failed until it was written, nor one flushing', async () => {
      const memtables = new Memtables({ limit: 4 * MiB })
      const a = fakeShard('a', 5 * MiB)
      a.fail = true
      memtables.add(a)
      expect(a.flushes).to.equal(1)
      memtables.wrote(a) // a write while the flush is in flight: not a second flush
      expect(a.flushes).to.equal(1)
      const waiting = memtables.room()
      a.release()
      await waiting // the failed flush ended: nothing is in flight, the write goes on
      await settle()
      expect(a.flushes).to.equal(1)
      await memtables.room()
      a.fail = false
      memtables.wrote(a) // written again: it may be flushed
      expect(a.flushes).to.equal(2)
      a.release()
      await memtables.room()
      expect(memtables.total).to.equal(0)
    })

    it('a shard closing leaves the count, and a write waiting on its flush goes on', async () => {
      const memtables = new Memtables({ limit: 4 * MiB })
      const [a, b] = [fakeShard('a', 3 * MiB), fakeShard('b', 2 * MiB)]
      memtables.add(a)
      memtables.add(b)
      expect(a.flushes).to.equal(1)
      const waiting = memtables.room()
      memtables.remove(a)
      await waiting
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

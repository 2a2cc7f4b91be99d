'use strict'

// What a collection of expired files costs the shard it runs in, and what the collector
// learns when an expiring file goes by other means (unlink, overwrite).

const { expect } = require('chai')
const path = require('node:path')
const { Shard } = require('../lib/shard/shard')
const { ChunkKeys } = require('../lib/shard/records')
const { useTmp, scaled, sleep } = require('./helpers')

const HOUR = 3600 * 1000

describe('expiry: the collection\'s cost', () => {
  const t = useTmp()

  describe('a shard whose earliest expiring file went by other means', () => {
    // Calls of Shard#collectExpired while a test runs: a lease of the shard each.
    const calls = []
    let collect
    beforeEach(() => {
      calls.length = 0
      collect = Shard.prototype.collectExpired
      Shard.prototype.collectExpired = function (...args) {
        calls.push(this.index)
        return collect.apply(this, args)
      }
    })
    afterEach(() => { Shard.prototype.collectExpired = collect })

    // 'soon' holds the shard's earliest expiry, 'later' an hour on; gone(store) removes
    // 'soon' by other means. Past the earliest expiry, no collection leases the shard.
    const check = (gone) => async () => {
      const store = t.open({ shardCount: 1 })
      const soon = Date.now() + scaled(2000)
      await store.writeFile('soon', 'x', { expires: soon })
      await store.writeFile('later', 'y', { expires: Date.now() + HOUR })
      await gone(store)
      await sleep(Math.max(0, soon - Date.now()) + scaled(600))
      expect(calls, 'collections').to.deep.equal([])
      expect(await store.exists('later')).to.equal(true)
      expect((await store.stat('later')).expires.getTime()).to.be.above(Date.now())
    }

    it('unlinked: its expiry is read again from the index', check((store) => store.unlink('soon')))

    it('written again without an expiry: the same', check(async (store) => {
      await store.writeFile('soon', 'x again')
      expect((await store.stat('soon')).expires).to.equal(undefined)
    }))

    it('written again with a sooner expiry: that one is the shard\'s, and the file is collected', async () => {
      const store = t.open({ shardCount: 1 })
      await store.writeFile('f', 'x', { expires: Date.now() + HOUR })
      await store.writeFile('f', 'x', { expires: Date.now() + scaled(300) })
      const end = Date.now() + scaled(5000)
      while ((await store.metrics()).expiries.files < 1 && Date.now() < end) await sleep(20)
      expect((await store.metrics()).expiries.files).to.equal(1)
      expect(await store.exists('f')).to.equal(false)
    })

    it('closed after the unlink: the usage cache keeps the later time, and the shard is not opened for nothing', async () => {
      const store = t.open({ shardCount: 4 })
      const soon = Date.now() + scaled(2000)
      await store.writeFile('soon', 'x', { expires: soon })
      await store.writeFile('soon2', 'x', { expires: soon })
      await store.unlink('soon')
      await store.unlink('soon2')
      await store.close()
      const again = t.open({ openAhead: false })
      await again.open()
      await sleep(Math.max(0, soon - Date.now()) + scaled(600))
      expect((await again.metrics()).shardOpens, 'shards opened').to.equal(0)
      expect(calls).to.deep.equal([])
    })
  })

  describe('a collection\'s metadata reads', () => {
    it('overlap, at most 16 in flight, and every due file is removed', async () => {
      const store = t.open({ shardCount: 1 })
      const expires = Date.now() + HOUR
      for (let i = 0; i < 100; i++) await store.writeFile(`f${i}`, `data ${i}`, { expires })
      await store.writeFile('live', 'stays')
      await store.close()
      const shard = await Shard.open({ index: 0, location: path.join(t.dir, 'store', '000.s'), cap: 1e9, chunkKeys: new ChunkKeys(1e9, 128 * 1024), sync: false })
      try {
        let inFlight = 0
        let most = 0
        const getMeta = shard.getMeta.bind(shard)
        shard.getMeta = async (key) => {
          most = Math.max(most, ++inFlight)
          try {
            return await getMeta(key)
          } finally {
            inFlight--
          }
        }
        expect(await shard.collectExpired(expires + 1)).to.deep.equal({ files: 100, more: false })
        expect(most, 'reads in flight at once').to.be.within(2, 16)
        expect(shard.files).to.equal(1)
        expect(shard.nextExpiry).to.equal(undefined)
      } finally {
        await shard.close()
      }
    })
  })
})

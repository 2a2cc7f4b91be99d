'use strict'

const path = require('node:path')
const { expect } = require('chai')
const { WriteBudget } = require('../lib/write-budget')
const { ChunkWriter } = require('../lib/chunk-writer')
const { Shard } = require('../lib/shard')
const { ChunkKeys } = require('../lib/records')
const { useTmp, bytes, keyInShard, REF } = require('./helpers')

const C = 1024

describe('write budget: memory held by writers is bounded', function () {
  const t = useTmp()

  it('grants bytes in the order asked, and more than the whole budget only when nothing is taken', async () => {
    const budget = new WriteBudget(10)
    expect(budget.tryTake(6)).to.equal(true)
    const order = []
    const a = budget.take(6).then(() => order.push('a'))
    const b = budget.take(1).then(() => order.push('b')) // fits, but a asked first
    expect(budget.tryTake(1)).to.equal(false)
    await Promise.resolve()
    expect(order).to.deep.equal([])
    budget.give(6)
    await Promise.all([a, b])
    expect(order).to.deep.equal(['a', 'b'])
    budget.give(7)
    expect(budget.tryTake(25)).to.equal(true) // oversized, granted alone
    expect(budget.tryTake(1)).to.equal(false)
  })

  it('writers sharing a budget of 4 chunks all finish while one of them stalls holding chunks', async () => {
    const store = t.open({ referenceId: REF, chunkSize: C })
    await store.writeFile(keyInShard(REF, 3, 'w'), 'x') // the shard exists
    await store.close()
    const shard = await Shard.open({ index: 3, location: path.join(store.location, '003.s'), cap: 1e9, chunkKeys: new ChunkKeys(1e9, C), sync: false })
    const budget = new WriteBudget(4 * C)
    const writer = (key) => new ChunkWriter({ shard, key, chunkSize: C, release: () => {}, budget })
    try {
      const stalled = writer('s'.repeat(40))
      await stalled.write(bytes(4 * C, 's')) // holds the whole budget, then its caller goes quiet
      const others = Array.from({ length: 5 }, (_, i) => (async () => {
        const w = writer(String(i).repeat(40))
        for (let j = 0; j < 10; j++) await w.write(bytes(2 * C, `${i}-${j}`))
        return w.finish()
      })())
      const metas = await Promise.all(others)
      expect(metas.map((m) => m.size)).to.deep.equal(Array(5).fill(20 * C))
      await stalled.write(bytes(C, 'end'))
      expect((await stalled.finish()).size).to.equal(5 * C)
      expect(budget.tryTake(4 * C)).to.equal(true) // everything was given back
    } finally {
      await shard.close()
    }
  })
})

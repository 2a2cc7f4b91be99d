'use strict'

const path = require('node:path')
const { expect } = require('chai')
const { WriteBudget, STALL_MS } = require('../lib/data/write-budget')
const { recordLength } = require('../lib/shard/chunk-record')
const { ChunkWriter } = require('../lib/data/chunk-writer')
const { Shard } = require('../lib/shard/shard')
const { ChunkKeys } = require('../lib/shard/records')
const { useTmp, bytes, keyInShard, rejects, REF, within: settlesWithin } = require('./helpers')
const errors = require('../lib/api/errors')

const C = 1024
const MiB = 1024 * 1024

// Settles with `promise`, or fails the test after `ms` (scaled by KFS_TEST_SLOWDOWN):
// a leaked budget shows as a hang.
const within = (ms, promise, what) => settlesWithin(promise, ms, what)

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

  it('a wait ends when its signal aborts or the budget shuts down, and lets those behind it go on', async () => {
    const budget = new WriteBudget(10)
    expect(budget.tryTake(8)).to.equal(true)
    const stop = new AbortController()
    const big = budget.take(6, stop.signal)
    const small = budget.take(2) // fits, but waits behind `big`
    stop.abort(errors.cancelled('big'))
    await rejects(big, 'ECANCELED')
    await within(10000, small, 'the wait behind the aborted one')
    await rejects(budget.take(1, AbortSignal.abort(errors.cancelled('x'))), 'ECANCELED')
    const waiting = budget.take(5)
    budget.shutdown(errors.closed())
    await rejects(waiting, 'ECLOSED')
    await rejects(budget.take(5), 'ECLOSED') // would wait: refused
    expect(budget.tryTake(0)).to.equal(true) // nobody left waiting
  })

  it('writers sharing a budget of 4 chunks all finish while one of them stalls holding chunks', async () => {
    const store = t.open({ referenceId: REF, chunkSize: C })
    await store.writeFile(keyInShard(REF, 3, 'w'), 'x') // the shard exists
    await store.close()
    const shard = await Shard.open({ index: 3, location: path.join(store.location, '003.s'), cap: 1e9, chunkKeys: new ChunkKeys(1e9, C), sync: false })
    const budget = new WriteBudget(4 * C)
    const writer = (key) => new ChunkWriter({ lease: { shard, release: () => {}, mayWrite: () => {} }, key, chunkSize: C, budget })
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

  describe('the chunk a writer is filling', () => {
    let shard
    beforeEach(async () => {
      const store = t.open({ referenceId: REF, chunkSize: C })
      await store.writeFile(keyInShard(REF, 3, 'w'), 'x') // the shard exists
      await store.close()
      shard = await Shard.open({ index: 3, location: path.join(store.location, '003.s'), cap: 1e9, chunkKeys: new ChunkKeys(1e9, C), sync: false })
    })
    afterEach(() => shard.close())
    const writer = (key, budget) => new ChunkWriter({ lease: { shard, release: () => {}, mayWrite: () => {} }, key, chunkSize: C, budget })

    it('counts in the budget from its first byte: writers past it wait, and go on as the others fill theirs', async () => {
      const record = recordLength(C)
      const budget = new WriteBudget(4 * record)
      const writers = Array.from({ length: 6 }, (_, i) => writer(String(i).repeat(40), budget))
      const started = writers.map((w, i) => w.write(bytes(C / 2, `${i}`)).then(() => i))
      const first = await within(10000, Promise.all(started.slice(0, 4)), 'the first four')
      expect(first).to.deep.equal([0, 1, 2, 3])
      expect(budget.held).to.equal(4 * record) // four chunks half filled
      let late = 0
      started.slice(4).forEach((p) => p.then(() => late++))
      await new Promise((resolve) => setTimeout(resolve, 50))
      expect(late, 'writers past the budget wait').to.equal(0)
      // Two of the first fill their chunk, which LevelDB writes, and end: the two others start theirs.
      for (const w of writers.slice(0, 2)) await w.write(bytes(C / 2, 'rest'))
      await within(10000, Promise.all(writers.slice(0, 2).map((w) => w.finish())), 'the two filled')
      await within(10000, Promise.all(started), 'the two past the budget')
      expect(budget.held).to.equal(4 * record)
      for (const w of writers.slice(2)) await w.finish()
      expect(budget.held).to.equal(0)
    })

    it('held by writers whose callers went quiet, lets another go on past the budget once nothing came back for a while', async () => {
      const budget = new WriteBudget(2 * recordLength(C))
      const quiet = [writer('q'.repeat(40), budget), writer('r'.repeat(40), budget)]
      for (const w of quiet) await w.write(bytes(C / 2, 'q')) // a caller that writes the next part only once `other` is written
      const other = writer('o'.repeat(40), budget)
      const start = Date.now()
      await within(10000, other.write(bytes(2 * C, 'o')), 'the writer waiting behind the stalled ones')
      expect(Date.now() - start).to.be.at.least(STALL_MS - 50)
      expect((await other.finish()).size).to.equal(2 * C)
      for (const w of quiet) expect((await w.finish()).size).to.equal(C / 2)
      expect(budget.held).to.equal(0)
    })
  })

  describe('on a shard whose writes fail', () => {
    let shard
    beforeEach(async () => {
      const store = t.open({ referenceId: REF })
      await store.writeFile(keyInShard(REF, 3, 'w'), 'x') // the shard exists
      await store.close()
      shard = await Shard.open({ index: 3, location: path.join(store.location, '003.s'), cap: 1e12, chunkKeys: new ChunkKeys(1e12, 128 * 1024), sync: false })
    })
    afterEach(() => shard.close())

    // writeChunks fails like LevelDB on a full disk for versions whose key passes `failing`.
    const failWrites = (failing) => {
      const real = shard.writeChunks.bind(shard)
      shard.writeChunks = (key, ...rest) => failing(key, rest[1])
        ? Promise.reject(errors.diskFull('shard 003', 'No space left on device'))
        : real(key, ...rest)
    }
    const writer = (key, budget, options = {}) => new ChunkWriter({ lease: { shard, release: () => {}, mayWrite: () => {} }, key, chunkSize: 128 * 1024, budget, ...options })

    it('gives the budget back when the first batch fails: 100 failed 2 MiB writes, then a write succeeds', async () => {
      const budget = new WriteBudget(8 * MiB)
      failWrites((key) => key.startsWith('f'))
      const data = bytes(2 * MiB, 'f')
      for (let i = 0; i < 100; i++) {
        const w = writer('f'.repeat(39) + (i % 10), budget, { size: 2 * MiB })
        const failed = within(10000, (async () => {
          try {
            await w.write(data)
            await w.finish()
          } catch (err) {
            await w.abort()
            throw err
          }
        })(), `failed write ${i}`)
        await rejects(failed, 'ENOSPC')
      }
      const ok = writer('a'.repeat(40), budget)
      await within(10000, ok.write(bytes(2 * MiB, 'ok')), 'the write after the failures')
      expect((await ok.finish()).size).to.equal(2 * MiB)
      expect(budget.tryTake(budget.total)).to.equal(true) // all of it given back
    })

    it('a batch that fails stops the write: the rest of its chunks are not sent', async () => {
      const budget = new WriteBudget(64 * MiB)
      let sent = 0
      failWrites((key, first) => ++sent > 0 && first === 10)
      const w = writer('d'.repeat(40), budget)
      await rejects((async () => {
        try {
          await w.write(bytes(8 * MiB, 'big')) // 64 chunks in one write()
          await w.finish()
        } catch (err) {
          await w.abort()
          throw err
        }
      })(), 'ENOSPC')
      expect(sent).to.be.below(20)
      expect(budget.tryTake(budget.total)).to.equal(true) // all of it given back
    })

    it('a batch sent for another writer that fails fails the write: nothing with missing chunks is committed', async () => {
      const budget = new WriteBudget(3 * 128 * 1024)
      const key = 'b'.repeat(40)
      failWrites((k, first) => k === key && first === 0)
      const held = writer(key, budget)
      await held.write(bytes(2 * 128 * 1024, 'held')) // two chunks held, not yet sent
      const other = writer('c'.repeat(40), budget)
      await within(10000, other.write(bytes(4 * 128 * 1024, 'other')), 'the other writer') // makes `held` send its batch, which fails
      await other.finish()
      await rejects(held.write(bytes(128 * 1024, 'more')), 'ENOSPC')
      await rejects(held.finish(), 'ENOSPC')
      await held.abort()
      expect(await shard.getMeta(key)).to.equal(undefined)
    })

    it('abort() ends a write waiting for the budget', async () => {
      const budget = new WriteBudget(MiB)
      expect(budget.tryTake(MiB)).to.equal(true) // taken by somebody who never gives it back
      const w = writer('d'.repeat(40), budget)
      const writing = w.write(bytes(256 * 1024, 'd'))
      await new Promise((resolve) => setImmediate(resolve))
      const aborted = w.abort()
      await rejects(within(10000, writing, 'the waiting write'), 'ECANCELED')
      await within(10000, aborted, 'abort()')
      expect(await shard.getMeta('d'.repeat(40))).to.equal(undefined)
    })

    it('an aborted write gives back its claim on the shard and its budget before its cleanup, its lease after', async () => {
      const budget = new WriteBudget(8 * MiB)
      let cleaned
      const cleanup = new Promise((resolve) => { cleaned = resolve })
      let during
      const discard = shard.discard.bind(shard)
      shard.discard = async (...args) => {
        during = { reserved: shard.reserved, budgetFree: budget.tryTake(budget.total), released }
        if (during.budgetFree) budget.give(budget.total)
        await cleanup
        return discard(...args)
      }
      let released = false
      const w = new ChunkWriter({ lease: { shard, release: () => { released = true }, mayWrite: () => {} }, key: 'e'.repeat(40), chunkSize: 128 * 1024, budget, size: 3 * MiB })
      await w.write(bytes(2 * MiB, 'e')) // two batches sent, more held
      const aborted = w.abort()
      while (!during) await new Promise((resolve) => setImmediate(resolve))
      expect(during).to.deep.equal({ reserved: 0, budgetFree: true, released: false })
      cleaned()
      await within(10000, aborted, 'abort()')
      expect(released).to.equal(true)
      expect(await shard.getMeta('e'.repeat(40))).to.equal(undefined)
    })

    it('finish() of a write that cannot commit gives back its lease, space and budget without abort()', async () => {
      const budget = new WriteBudget(8 * MiB)
      const key = 'f'.repeat(40)
      failWrites((k) => k === key)
      let released = false
      const w = new ChunkWriter({ lease: { shard, release: () => { released = true }, mayWrite: () => {} }, key, chunkSize: 128 * 1024, budget, size: 3 * MiB })
      await rejects(w.write(bytes(2 * MiB, 'f')), 'ENOSPC') // its first batch failed
      await rejects(w.finish(), 'ENOSPC')
      expect(released).to.equal(true)
      expect(shard.reserved).to.equal(0)
      expect(budget.tryTake(budget.total)).to.equal(true)
    })
  })

  it('a ticket gives back what it took, and on close whatever it still holds, once', async () => {
    const budget = new WriteBudget(10)
    const ticket = budget.ticket()
    expect(ticket.tryTake(4)).to.equal(true)
    await ticket.take(4)
    ticket.give(3)
    ticket.close()
    ticket.close()
    ticket.give(5) // nothing left to give: the budget is not credited twice
    expect(budget.tryTake(10)).to.equal(true)
    expect(budget.tryTake(1)).to.equal(false)
    budget.give(10)
    // A wait granted after its write ended goes straight back.
    expect(budget.tryTake(8)).to.equal(true)
    const late = budget.ticket()
    const waiting = late.take(5)
    late.close()
    budget.give(8)
    await waiting
    expect(budget.tryTake(10)).to.equal(true)
  })
})

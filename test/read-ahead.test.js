'use strict'

const { expect } = require('chai')
const { ReadAhead, readAheadShape, MIN_EACH, MAX_EACH, GETS_IN_FLIGHT } = require('../lib/data/read-ahead')

describe('read-ahead shared among readers', () => {
  it('one reader reads ahead the most; 256 readers together stay within the budget plus a minimum each', () => {
    const BUDGET = 128 * 1024 * 1024
    const readAhead = new ReadAhead(BUDGET)
    const shares = Array.from({ length: 256 }, () => readAhead.take())
    expect(shares[0].bytes).to.equal(MAX_EACH)
    expect(shares[255].bytes).to.equal(MIN_EACH)
    const total = shares.reduce((sum, s) => sum + s.bytes, 0)
    expect(total).to.be.at.most(BUDGET + 256 * MIN_EACH)
    expect(total).to.be.below(256 * MAX_EACH / 3) // not every reader got the most
    expect(readAhead.held).to.equal(total) // what the store's memory budget counts
    for (const share of shares) {
      share.give()
      share.give() // once only
    }
    expect(readAhead.held).to.equal(0)
    const again = Array.from({ length: 256 }, () => readAhead.take())
    expect(again.map((s) => s.bytes)).to.deep.equal(shares.map((s) => s.bytes))
  })

  it('a share becomes a binding fetch size and a queue of chunks, the binding\'s copy of its last trip counted', () => {
    const C = 128 * 1024
    // What a reader holds at most: its queue (prefetch + a trip) and the binding's copy
    // of the last trip.
    const held = ({ highWaterMark, prefetch }, chunkSize) => prefetch + 2 * Math.ceil(highWaterMark / chunkSize)
    // Three chunks a trip (the binding stops past 2.5 chunks' bytes), the rest queued.
    expect(readAheadShape(MAX_EACH, C)).to.deep.equal({ highWaterMark: 2.5 * C, prefetch: 18 })
    expect(held(readAheadShape(MAX_EACH, C), C)).to.equal(MAX_EACH / C)
    // The least share: one chunk a trip, fetched once the consumer took the last.
    expect(readAheadShape(MIN_EACH, C)).to.deep.equal({ highWaterMark: C / 2, prefetch: 0 })
    expect(held(readAheadShape(MIN_EACH, C), C) * C).to.equal(MIN_EACH)
    for (const bytes of [3 * C, 5 * C, 7 * C, 12 * C]) expect(held(readAheadShape(bytes, C), C)).to.equal(bytes / C)
    // Chunks larger than a share: two, whatever the share.
    expect(readAheadShape(MIN_EACH, 1024 * 1024)).to.deep.equal({ highWaterMark: 512 * 1024, prefetch: 0 })
    expect(readAheadShape(MAX_EACH, 1024 * 1024)).to.deep.equal({ highWaterMark: 512 * 1024, prefetch: 1 })
  })

  it('lets at most GETS_IN_FLIGHT chunk gets of a store be in flight, and a failed one frees its place', async () => {
    const readAhead = new ReadAhead()
    const pending = []
    let running = 0
    let most = 0
    const db = {
      get: (key) => new Promise((resolve, reject) => {
        most = Math.max(most, ++running)
        pending.push(() => {
          running--
          if (key === 'bad') reject(new Error('bad'))
          else resolve(key)
        })
      })
    }
    const share = readAhead.take()
    const keys = Array.from({ length: 3 * GETS_IN_FLIGHT }, (_, i) => (i === 1 ? 'bad' : `k${i}`))
    let done = false
    const results = Promise.all(keys.map((k) => share.get(db, k).catch((err) => err.message))).finally(() => (done = true))
    while (!done) {
      pending.splice(0).forEach((settle) => settle())
      await new Promise((resolve) => setImmediate(resolve))
    }
    expect(await results).to.deep.equal(keys)
    expect(most).to.equal(GETS_IN_FLIGHT)
  })

  it('a get waiting for a place leaves the queue when its signal aborts; the place passes to the next', async () => {
    const readAhead = new ReadAhead()
    const pending = []
    const asked = []
    const db = { get: (key) => new Promise((resolve) => { asked.push(key); pending.push(() => resolve(key)) }) }
    const share = readAhead.take()
    const first = Array.from({ length: GETS_IN_FLIGHT }, (_, i) => share.get(db, `k${i}`))
    const controller = new AbortController()
    const left = share.get(db, 'left', controller.signal)
    const next = share.get(db, 'next')
    controller.abort(new Error('the reader was destroyed'))
    expect((await left.catch((err) => err)).message).to.equal('the reader was destroyed')
    pending.shift()()
    await new Promise((resolve) => setImmediate(resolve))
    pending.splice(0).forEach((settle) => settle())
    expect(await Promise.all([...first, next])).to.deep.equal([...Array.from({ length: GETS_IN_FLIGHT }, (_, i) => `k${i}`), 'next'])
    expect(asked).to.not.include('left')
  })
})

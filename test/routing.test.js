'use strict'

const { expect } = require('chai')
const crypto = require('node:crypto')
const { shardFor } = require('../lib/shard/routing')
const { SHARD_COUNT } = require('../lib/base/shard-names')

// Pearson's chi-square statistic of counts against a uniform spread.
function chiSquare (counts) {
  const total = counts.reduce((a, b) => a + b, 0)
  const expected = total / counts.length
  return counts.reduce((sum, c) => sum + (c - expected) ** 2 / expected, 0)
}

// With 255 degrees of freedom the chi-square statistic exceeds 340 with probability
// about 0.0003 for a truly uniform spread; keys are deterministic, so no flakiness.
const CRITICAL = 340

function spread (referenceId, keys, route = shardFor) {
  const counts = new Array(SHARD_COUNT).fill(0)
  for (const key of keys) counts[route(referenceId, key)]++
  return counts
}

function * randomKeys (n, prefix = Buffer.alloc(0)) {
  for (let i = 0; i < n; i++) {
    const tail = crypto.createHash('sha256').update(`k${i}`).digest().subarray(0, 20 - prefix.length)
    yield Buffer.concat([prefix, tail]).toString('hex')
  }
}

describe('routing', () => {
  const referenceId = crypto.createHash('sha256').update('reference').digest().subarray(0, 20)

  it('always sends a key to the same shard, within 0..255', () => {
    const key = 'ab'.repeat(20)
    const shard = shardFor(referenceId, key)
    expect(shard).to.be.within(0, 255)
    expect(shardFor(referenceId, key)).to.equal(shard)
  })

  it('spreads 100,000 random keys evenly over the 256 shards', () => {
    const counts = spread(referenceId, randomKeys(100000))
    expect(chiSquare(counts)).to.be.below(CRITICAL)
    expect(Math.min(...counts)).to.be.above(0)
  })

  it('with fewer shards (a power of two), stays within them and even', () => {
    const keys = [...randomKeys(20000)]
    expect(new Set(keys.map((k) => shardFor(referenceId, k, 1)))).to.deep.equal(new Set([0]))
    const counts = new Array(16).fill(0)
    for (const key of keys) counts[shardFor(referenceId, key, 16)]++
    expect(chiSquare(counts)).to.be.below(37.7) // 15 degrees of freedom, p = 0.001
  })

  it('spreads 100,000 keys that share their first bytes with the reference ID evenly', () => {
    const keys = [...randomKeys(100000, referenceId.subarray(0, 4))]
    expect(chiSquare(spread(referenceId, keys))).to.be.below(CRITICAL)
    // The same keys routed on their raw first byte all land in one shard: the check
    // above can fail, and hashing is what prevents it.
    const raw = spread(referenceId, keys, (ref, key) => ref[0] ^ parseInt(key.slice(0, 2), 16))
    expect(Math.max(...raw)).to.equal(100000)
  })
})

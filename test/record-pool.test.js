'use strict'

const { expect } = require('chai')
const { RecordPool } = require('../lib/data/record-pool')
const { recordLength } = require('../lib/shard/chunk-record')
const { useTmp, bytes, keyInShard, REF } = require('./helpers')

const C = 1024
const WHOLE = recordLength(C)

describe('chunk records are reused once their batch was sent', function () {
  const t = useTmp()

  it('gives a whole record back for reuse, also when only its leading part was used', () => {
    const pool = new RecordPool()
    const record = pool.take(C, true)
    expect(record.length).to.equal(WHOLE)
    pool.give([record.subarray(0, 100)], WHOLE)
    const again = pool.take(C, true)
    expect(again.buffer).to.equal(record.buffer)
    expect(again.length).to.equal(WHOLE)
    expect(pool.take(C, true).buffer).to.not.equal(record.buffer) // given back once, taken once
  })

  it('never takes in memory it did not make, nor records of another size', () => {
    const pool = new RecordPool()
    const foreign = Buffer.allocUnsafeSlow(WHOLE)
    const short = pool.take(C - 1, false)
    pool.give([foreign, short], WHOLE)
    const taken = pool.take(C, true)
    expect(taken.buffer).to.not.equal(foreign.buffer)
    expect(taken.buffer).to.not.equal(short.buffer)
  })

  it('concurrent writes sharing reused records each read back their own bytes', async () => {
    const store = t.open({ referenceId: REF, chunkSize: 64 * C })
    const keys = Array.from({ length: 6 }, (_, i) => keyInShard(REF, i % 2, `reuse ${i}`)) // two writers per shard
    // Files of 2 MiB send their chunks as they come; files of 200 KiB keep theirs until
    // the commit batch, across its wait for the shard.
    const size = (i) => (i < 3 ? 2 * 1024 * C : 200 * C) + i * 777
    for (let round = 0; round < 2; round++) {
      await Promise.all(keys.map((key, i) => store.writeFile(key, bytes(size(i), `${key} ${round}`))))
      for (const [i, key] of keys.entries()) {
        expect((await store.readFile(key)).equals(bytes(size(i), `${key} ${round}`))).to.equal(true)
      }
    }
    expect((await store.verify()).problems).to.deep.equal([])
  })
})

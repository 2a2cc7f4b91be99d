'use strict'

const { expect } = require('chai')
const { Readable } = require('node:stream')
const { pipeline } = require('node:stream/promises')
const { Shard } = require('../lib/shard/shard')
const { tmpLeftovers, useTmp, rejects, bytes, keyInShard, assertNoStrayChunks, REF, scaled } = require('./helpers')

const C = 1024
const CAP = 8 * C // per shard
const options = { chunkSize: C, maxTableSize: 256 * CAP, referenceId: REF }

describe('capacity', () => {
  const t = useTmp()
  const shard = 7
  const key = (salt) => keyInShard(REF, shard, salt)

  it('fails a write that would exceed the shard cap with ENOSPC before writing', async () => {
    const store = t.open(options)
    await store.writeFile(key('a'), bytes(5 * C))
    const before = await store.usage()
    const err = await rejects(store.writeFile(key('b'), bytes(4 * C)), 'ENOSPC')
    expect(err.message).to.match(/shard 007 is full/)
    expect(err.shard).to.equal(shard)
    expect(await store.usage()).to.deep.equal(before)
    expect(await store.exists(key('b'))).to.equal(false)
    expect((await store.readFile(key('a'))).equals(bytes(5 * C))).to.equal(true)
    await store.writeFile(key('c'), bytes(3 * C)) // exactly fills the shard
    expect((await store.usage()).shards.find((s) => s.index === shard)).to.include({ used: CAP, free: 0 })
    await rejects(store.writeFile(key('d'), 'x'), 'ENOSPC')
    await store.writeFile(key('e'), '') // an empty file always fits
  })

  it('refuses a file larger than a whole shard', async () => {
    const store = t.open(options)
    await rejects(store.writeFile(key('big'), bytes(CAP + 1)), 'ENOSPC')
    await rejects(store.put(bytes(CAP + 1)), 'ENOSPC')
    const err = await rejects(store.put(Readable.from([bytes(CAP), bytes(1)])), 'ENOSPC')
    expect(err.message).to.contain(`a shard holds at most ${CAP}`)
    expect(await store.usage()).to.include({ used: 0, files: 0 })
    expect(tmpLeftovers(store.location)).to.deep.equal([])
  })

  it('an overwrite needs room for the new copy while the old one exists', async () => {
    const store = t.open(options)
    await store.writeFile(key('o'), bytes(6 * C))
    await rejects(store.writeFile(key('o'), bytes(3 * C)), 'ENOSPC')
    await store.writeFile(key('o'), bytes(2 * C))
    expect((await store.usage()).used).to.equal(2 * C)
  })

  it('a stream of unknown length fails when it crosses the cap and rolls back', async () => {
    const store = t.open(options)
    await store.writeFile(key('x'), bytes(2 * C))
    const before = await store.usage()
    const ws = store.createWriteStream(key('stream'))
    await rejects(pipeline(Readable.from([bytes(3 * C), bytes(3 * C), bytes(C)]), ws), 'ENOSPC')
    expect(await store.exists(key('stream'))).to.equal(false)
    // The shards holding bytes: the store makes its others ahead meanwhile, empty.
    const held = (usage) => ({ ...usage, shards: usage.shards.filter((s) => s.used > 0 || s.files > 0) })
    expect(held(await store.usage())).to.deep.equal(held(before))
    await store.writeFile(key('y'), bytes(6 * C)) // the rolled-back claim is free again
    await store.close()
    await assertNoStrayChunks(t.dir)
  })

  it('ENOSPC gives the file\'s size and the room its shard had when the write began', async () => {
    const store = t.open(options)
    await store.writeFile(key('half'), bytes(4 * C))
    const whole = await rejects(store.writeFile(key('w'), bytes(6 * C)), 'ENOSPC')
    expect(whole).to.include({ shard, needed: 6 * C, free: 4 * C })
    expect(whole.message).to.equal(`shard 007 is full: the file is ${6 * C} bytes, and the shard had ${4 * C} bytes free when its write began`)
    // A stream of unknown length: what came of it before the shard was full.
    const pieces = Array.from({ length: 20 }, (_, i) => bytes(C / 2, `p${i}`))
    const streamed = await rejects(pipeline(Readable.from(pieces), store.createWriteStream(key('s'))), 'ENOSPC')
    expect(streamed).to.include({ shard, needed: 4 * C + C / 2, free: 4 * C })
    expect(streamed.message).to.equal(`shard 007 is full: the file reached ${4 * C + C / 2} bytes, and the shard had ${4 * C} bytes free when its write began`)
    // Its size announced: refused before a byte is written, with the file's size.
    const ws = store.createWriteStream(key('s'), { size: 10 * C })
    const announced = await rejects(pipeline(Readable.from(pieces), ws), 'ENOSPC')
    expect(announced).to.include({ shard, needed: 10 * C, free: 4 * C })
    expect(await store.usage()).to.include({ used: 4 * C, files: 1 })
  })

  it('a stream whose size was announced fails with EINVAL if it writes more or less, and commits nothing', async () => {
    const store = t.open(options)
    await rejects(pipeline(Readable.from([bytes(C), bytes(C)]), store.createWriteStream(key('more'), { size: C + 1 })), 'EINVAL')
    await rejects(pipeline(Readable.from([bytes(C)]), store.createWriteStream(key('less'), { size: C + 1 })), 'EINVAL')
    const ws = store.createWriteStream(key('exact'), { size: 2 * C })
    await pipeline(Readable.from([bytes(C), bytes(C)]), ws)
    expect(ws.size).to.equal(2 * C)
    expect(await store.usage()).to.include({ used: 2 * C, files: 1 })
    for (const size of [-1, 1.5, '3', NaN]) expect(() => store.createWriteStream(key('bad'), { size })).to.throw().with.property('code', 'EINVAL')
  })

  it('concurrent writes cannot overfill a shard together', async () => {
    const store = t.open(options)
    const results = await Promise.allSettled(Array.from({ length: 6 }, (_, i) => store.writeFile(key(`p${i}`), bytes(3 * C))))
    const ok = results.filter((r) => r.status === 'fulfilled').length
    expect(ok).to.equal(2)
    for (const r of results.filter((r) => r.status === 'rejected')) expect(r.reason.code).to.equal('ENOSPC')
    expect((await store.usage()).used).to.equal(6 * C)
  })

  it('files smaller than a chunk, committed without a ChunkWriter: ENOSPC before writing, no overfilling together, room given back by a failed commit', async () => {
    const store = t.open({ ...options, chunkSize: 16 * C })
    const results = await Promise.allSettled(Array.from({ length: 6 }, (_, i) => store.writeFile(key(`s${i}`), bytes(3 * C))))
    expect(results.filter((r) => r.status === 'fulfilled').length).to.equal(2)
    for (const r of results.filter((r) => r.status === 'rejected')) expect(r.reason.code).to.equal('ENOSPC')
    const commit = Shard.prototype.commit
    Shard.prototype.commit = () => Promise.reject(Object.assign(new Error('the commit failed'), { code: 'EIO' }))
    try {
      await rejects(store.writeFile(key('failed'), bytes(2 * C)), 'EIO')
    } finally {
      Shard.prototype.commit = commit
    }
    await store.writeFile(key('fills'), bytes(2 * C)) // the failed write's room is back
    expect((await store.usage()).shards.find((s) => s.index === shard)).to.include({ used: CAP, free: 0 })
    expect(await store.exists(key('failed'))).to.equal(false)
    await rejects(store.writeFile(key('x'), 'x'), 'ENOSPC')
    await store.close()
    await assertNoStrayChunks(t.dir) // nothing of the refused or failed writes was left
  })

  it('other shards are not affected by a full one', async () => {
    // One shard open at a time, and a short wait for it: a full shard's refused write
    // that kept its slot (or its lease) would make the other shard's write fail EBUSY.
    // 5 s, scaled: the slot's hand-over, a close, is slow on a loaded machine.
    const store = t.open({ ...options, maxOpenShards: 1, shardWaitTimeout: scaled(5000) })
    const other = keyInShard(REF, shard + 1, 'other')
    await store.writeFile(key('full'), bytes(CAP, 'full'))
    for (const data of ['x', bytes(2 * C)]) { // committed alone, and through a ChunkWriter
      const refused = await rejects(store.writeFile(key('more'), data), 'ENOSPC')
      expect(refused.shard).to.equal(shard)
      expect(refused.disk).to.equal(undefined) // the shard's cap, not the disk: the reserve is kept
      await store.writeFile(other, bytes(CAP, 'other'))
      expect((await store.readFile(other)).equals(bytes(CAP, 'other'))).to.equal(true)
      expect((await store.readFile(key('full'))).equals(bytes(CAP, 'full'))).to.equal(true)
      await store.unlink(other)
    }
    await store.writeFile(other, 'after')
    expect((await store.usage()).shards.map((s) => [s.index, s.used])).to.deep.equal([[shard, CAP], [shard + 1, 5]])
    expect(await store.exists(key('more'))).to.equal(false)
  })
})

'use strict'

const { expect } = require('chai')
const { Readable } = require('node:stream')
const { pipeline } = require('node:stream/promises')
const path = require('node:path')
const { Shard } = require('../lib/shard/shard')
const { ChunkKeys } = require('../lib/shard/records')
const { useTmp, rejects, bytes, sha256, collect, openShardLocks, keysForShards, assertNoStrayChunks, REF, scaled, sleep } = require('./helpers')
const { shardFor } = require('../lib/shard/routing')
const { coerceKey } = require('../lib/api/keys')
const { shardDirName } = require('../lib/base/shard-names')

// The shard a file named `name` goes to in a store of reference ID `ref`.
const keyShard = (ref, name) => shardFor(Buffer.from(ref, 'hex'), coerceKey(name).key)

const C = 1024

describe('concurrency', () => {
  const t = useTmp()

  it('concurrent writes to one key: the last commit wins, readers see whole versions', async () => {
    const store = t.open({ chunkSize: C })
    const versions = Array.from({ length: 8 }, (_, i) => bytes((i + 1) * 3 * C + i, `v${i}`))
    const valid = new Set(versions.map(sha256))
    await store.writeFile('k', versions[0])
    const reads = []
    const writes = versions.map(async (data, i) => {
      const piecesOf = Array.from({ length: Math.ceil(data.length / 500) }, (_, j) => data.subarray(j * 500, (j + 1) * 500))
      if (i % 2) await pipeline(Readable.from(piecesOf), store.createWriteStream('k'))
      else await store.writeFile('k', data)
    })
    for (let i = 0; i < 40; i++) {
      reads.push(store.readFile('k'))
      reads.push(collect(store.createReadStream('k')).then(Buffer.concat))
      await new Promise(setImmediate)
    }
    await Promise.all(writes)
    for (const data of await Promise.all(reads)) expect(valid.has(sha256(data))).to.equal(true)
    const final = await store.readFile('k')
    expect(valid.has(sha256(final))).to.equal(true)
    expect(await store.usage()).to.include({ used: final.length, files: 1 })
    await store.close()
    await assertNoStrayChunks(t.dir)
  })

  it('compact() running alongside commits never discards committed data', async () => {
    const store = t.open({ shardCount: 1 }) // one shard: every compact() meets every commit
    // Larger than one batch (1 MiB): written ahead of its commit under a pending record,
    // which is what discardAbandoned() inside compact() must leave alone.
    const data = bytes(3 * 1024 * 1024, 'race')
    const started = Date.now()
    for (let round = 0; Date.now() - started < 3000; round++) {
      const keys = Array.from({ length: 8 }, (_, i) => `r${round}-${i}`)
      let done = false
      const writes = Promise.all(keys.map((k) => store.writeFile(k, data))).finally(() => (done = true))
      while (!done) {
        await store.compact()
        await new Promise(setImmediate) // with no shard yet, compact() settles without I/O
      }
      await writes
      for (const key of keys) expect((await store.readFile(key)).equals(data), key).to.equal(true)
    }
  })

  it('a read stream keeps its version while the file is overwritten and unlinked', async () => {
    const store = t.open({ chunkSize: C })
    const old = bytes(40 * C, 'old')
    await store.writeFile('k', old)
    const rs = store.createReadStream('k')
    const first = await new Promise((resolve) => rs.once('data', resolve))
    rs.pause()
    await store.writeFile('k', bytes(10 * C, 'new'))
    await store.unlink('k')
    const rest = await collect(rs)
    expect(Buffer.concat([first, ...rest]).equals(old)).to.equal(true)
  })

  it('keeps at most maxOpenShards shards open, under concurrent load', async () => {
    const store = t.open({ chunkSize: C, maxOpenShards: 3, referenceId: REF })
    const keys = keysForShards(REF, 12)
    let peak = 0
    const timer = setInterval(() => (peak = Math.max(peak, openShardLocks(store.location))), 1)
    try {
      await Promise.all(keys.map(({ key }, i) => store.writeFile(key, bytes(5 * C + i))))
      await Promise.all(keys.map(async ({ key }, i) => expect((await store.readFile(key)).length).to.equal(5 * C + i)))
    } finally {
      clearInterval(timer)
    }
    expect(peak).to.be.within(1, 3)
    expect(openShardLocks(store.location)).to.be.at.most(3)
    expect((await store.usage()).files).to.equal(12)
  })

  it('a paused listing holds no shard: other shards stay usable with maxOpenShards 1', async () => {
    const store = t.open({ maxOpenShards: 1, referenceId: REF })
    const [a, b] = keysForShards(REF, 2)
    expect(b.shard).to.be.below(a.shard) // so b is behind the listing, whatever it does
    await store.writeFile(a.key, 'a')
    const listing = store.list()[Symbol.asyncIterator]()
    expect(await listing.next()).to.deep.equal({ done: false, value: { key: a.key, size: 1 } })
    await store.writeFile(b.key, 'b') // would wait forever if the listing held the slot
    // Listed shard by shard, in order: b's shard was passed before a's, so nothing is left.
    expect(await collect({ [Symbol.asyncIterator]: () => listing })).to.deep.equal([])
    expect((await store.readFile(b.key)).toString()).to.equal('b')
  })

  it('an operation waiting longer than shardWaitTimeout for a slot fails with EBUSY', async () => {
    const store = t.open({ maxOpenShards: 1, shardWaitTimeout: 200, idleTimeout: 50, referenceId: REF, chunkSize: C })
    const [a, b] = keysForShards(REF, 2)
    await store.writeFile(a.key, bytes(20 * C))
    const rs = store.createReadStream(a.key) // holds shard a while it is open
    await new Promise((resolve) => rs.once('readable', resolve))
    const started = Date.now()
    const err = await rejects(store.writeFile(b.key, 'b'), 'EBUSY')
    expect(Date.now() - started).to.be.within(150, scaled(10000))
    expect(err.message).to.contain('maxOpenShards')
    rs.destroy()
    await new Promise((resolve) => rs.once('close', resolve))
    // Once shard a closed by itself, the slot is free: the failed wait left no claim on
    // it. (Evicting a instead would put its close, a flush, within the 200 ms wait.)
    const until = Date.now() + scaled(10000)
    while (openShardLocks(store.location) > 0 && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 20))
    await store.writeFile(b.key, 'b')
  })

  it('operations waiting for a slot get one in the order they asked', async () => {
    const store = t.open({ maxOpenShards: 1, referenceId: REF, chunkSize: C })
    const [a, ...others] = keysForShards(REF, 6)
    await store.writeFile(a.key, bytes(20 * C))
    const rs = store.createReadStream(a.key) // holds the only slot
    await new Promise((resolve) => rs.once('readable', resolve))
    const done = []
    const writes = others.map(({ key }, i) => store.writeFile(key, `file ${i}`).then(() => done.push(i)))
    await sleep(50)
    expect(done).to.deep.equal([])
    rs.destroy()
    await Promise.all(writes)
    expect(done).to.deep.equal([0, 1, 2, 3, 4])
  })

  it('lists more files than one page holds, each once', async () => {
    const store = t.open({ shardCount: 1 })
    const names = Array.from({ length: 2345 }, (_, i) => `n${i}`)
    for (const name of names) await store.writeFile(name, '')
    const listed = await collect(store.list())
    expect(listed.map((e) => e.name).sort()).to.deep.equal([...names].sort())
  })

  it('closes idle shards after idleTimeout', async () => {
    const store = t.open({ idleTimeout: 20, referenceId: REF })
    await store.writeFile('a', 'b')
    // Its shard's: the store makes and opens the others ahead, and they close idle too.
    const held = () => openShardLocks(path.join(store.location, shardDirName(keyShard(REF, 'a'))))
    expect(held()).to.equal(1)
    // Waits for the close itself: a loaded machine may run the timer late, never early.
    const deadline = Date.now() + scaled(10000)
    while (held() > 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10))
    expect(held(), `closed within ${scaled(10000)} ms of a 20 ms idle timeout`).to.equal(0)
    expect((await store.readFile('a')).toString()).to.equal('b')
  })

  it('keeps a shard used again before its idleTimeout open, and closes it idleTimeout after its last use', async () => {
    // Used every 100 ms for two idle timeouts: its first idle timer fires while it is in
    // use or just used, and must wait for a whole idleTimeout after the last use
    // instead. Each use must come within idleTimeout of the one before, even on a loaded
    // machine: 1.5 s, scaled, for 100 ms.
    const idleTimeout = scaled(1500)
    const store = t.open({ idleTimeout, referenceId: REF })
    await store.writeFile('a', 'b')
    const held = () => openShardLocks(path.join(store.location, shardDirName(keyShard(REF, 'a'))))
    for (let i = 0; i < 2 * idleTimeout / 100; i++) {
      await new Promise((resolve) => setTimeout(resolve, 100))
      expect(held(), `open at use ${i}`).to.equal(1)
      await store.writeFile('a', `b${i}`)
    }
    const deadline = Date.now() + idleTimeout + scaled(10000)
    while (held() > 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10))
    expect(held(), `closed within ${idleTimeout + scaled(10000)} ms of its last use`).to.equal(0)
  })

  it('serves hundreds of mixed operations in flight', async () => {
    const store = t.open({ chunkSize: C, maxOpenShards: 4 })
    // 50 names: each is both written (every third i) and read (the others) while
    // writes to it are in flight; 60 would split them into names only written and
    // names only read.
    const versions = new Map() // name -> every version written to it
    const ops = []
    for (let i = 0; i < 300; i++) {
      const name = `f${i % 50}`
      if (i % 3 === 0) {
        const data = bytes((i * 37) % (6 * C), `d${i}`)
        versions.set(name, [...(versions.get(name) || []), data])
        ops.push(store.writeFile(name, data))
      } else {
        // A read sees a whole version written to that name, or none yet.
        ops.push(store.readFile(name).then(
          (data) => expect((versions.get(name) || []).some((v) => v.equals(data)), `read ${name}`).to.equal(true),
          (err) => expect(err.code, err.stack).to.equal('ENOENT')))
      }
    }
    await Promise.all(ops)
    expect(versions.size).to.equal(50)
    const listed = await collect(store.list())
    expect(listed.map((e) => e.name).sort()).to.deep.equal([...versions.keys()].sort())
    let used = 0
    for (const entry of listed) {
      // Which write to a name commits last is a race; whichever did, the listing, the
      // content and the accounting agree with it, and it is one that was written.
      const data = await store.readFile(entry.name)
      expect(versions.get(entry.name).some((v) => v.equals(data)), entry.name).to.equal(true)
      expect(entry.size, entry.name).to.equal(data.length)
      expect((await store.stat(entry.name)).size, entry.name).to.equal(data.length)
      used += data.length
    }
    expect(await store.usage()).to.include({ used, files: 50 })
  })

  // Issue 18, item 7: both found the content missing, both wrote it, and the second
  // replaced the first, leaving its bytes dead until reclaimed.
  it('concurrent put()s of one content write it once', async () => {
    const store = t.open({ shardCount: 1, reclaim: false })
    const data = bytes(512 * 1024, 'same')
    const keys = await Promise.all([
      store.put(data), store.put(Buffer.from(data)), store.put(Readable.from([data.subarray(0, 1000), data.subarray(1000)])), store.put(data)
    ])
    expect(new Set(keys)).to.deep.equal(new Set([sha256(data)]))
    expect(await store.usage()).to.include({ used: data.length, files: 1 })
    expect((await store.readFile(keys[0])).equals(data)).to.equal(true)
    await store.close()
    const shard = await Shard.open({ index: 0, location: path.join(store.location, '000.s'), cap: 1e12, chunkKeys: new ChunkKeys(1e12, 128 * 1024), sync: false })
    try {
      expect((await shard.reclaimPlan()).ids, 'versions replaced').to.deep.equal([])
    } finally {
      await shard.close()
    }
  })

  it('a put() waiting for one of the same content that failed writes it itself', async () => {
    const store = t.open({ shardCount: 1 })
    const data = bytes(1000, 'retried')
    const commit = Shard.prototype.commit
    let commits = 0
    Shard.prototype.commit = function (...args) {
      if (commits++ === 0) return Promise.reject(Object.assign(new Error('the first commit failed'), { code: 'EIO' }))
      return commit.apply(this, args)
    }
    let first, second
    try {
      [first, second] = await Promise.allSettled([store.put(data), store.put(data)])
    } finally {
      Shard.prototype.commit = commit
    }
    expect(first.reason && first.reason.code).to.equal('EIO')
    expect(second.value).to.equal(sha256(data))
    expect(commits).to.equal(2)
    expect((await store.readFile(sha256(data))).equals(data)).to.equal(true)
  })
})

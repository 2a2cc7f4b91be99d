'use strict'

const { expect } = require('chai')
const fs = require('node:fs')
const path = require('node:path')
const { Readable } = require('node:stream')
const kfs = require('..')
const { tmpLeftovers, useTmp, rejects, throws, bytes, sha256, collect, keysForShards, openShardLocks, REF, scaled } = require('./helpers')

const C = 1024 // a small chunk size keeps multi-chunk files small in tests

describe('store', () => {
  const t = useTmp()

  describe('writeFile / readFile', () => {
    it('round-trips empty, small, exact-chunk and multi-chunk files', async () => {
      const store = t.open({ chunkSize: C })
      const cases = { empty: Buffer.alloc(0), small: bytes(10), exact: bytes(C), two: bytes(C + 1), many: bytes(10 * C + 7) }
      for (const [name, data] of Object.entries(cases)) await store.writeFile(name, data)
      for (const [name, data] of Object.entries(cases)) {
        const back = await store.readFile(name)
        expect(back.equals(data), name).to.equal(true)
      }
    })

    it('accepts Buffer, Uint8Array and string data', async () => {
      const store = t.open()
      await store.writeFile('buf', Buffer.from('one'))
      await store.writeFile('u8', new Uint8Array([1, 2, 3]).subarray(1))
      await store.writeFile('str', 'héllo')
      expect(await store.readFile('buf')).to.deep.equal(Buffer.from('one'))
      expect(await store.readFile('u8')).to.deep.equal(Buffer.from([2, 3]))
      expect((await store.readFile('str')).toString()).to.equal('héllo')
    })

    it('replaces an existing file, smaller or larger, and keeps accounting exact', async () => {
      const store = t.open({ chunkSize: C })
      await store.writeFile('f', bytes(5 * C, 'a'))
      await store.writeFile('f', bytes(C / 2, 'b'))
      expect((await store.readFile('f')).equals(bytes(C / 2, 'b'))).to.equal(true)
      await store.writeFile('f', bytes(3 * C + 1, 'c'))
      expect((await store.readFile('f')).equals(bytes(3 * C + 1, 'c'))).to.equal(true)
      const usage = await store.usage()
      expect(usage.used).to.equal(3 * C + 1)
      expect(usage.files).to.equal(1)
    })

    it('uses a hex key as is, in any case', async () => {
      const store = t.open()
      const key = 'AB'.repeat(32)
      await store.writeFile(key, 'x')
      expect((await store.readFile(key.toLowerCase())).toString()).to.equal('x')
      expect((await store.stat(key)).name).to.equal(undefined)
    })

    it('rejects bad keys and data with EINVAL', async () => {
      const store = t.open()
      for (const key of ['', null, undefined, 7, {}, Buffer.from('k')]) {
        await rejects(store.writeFile(key, 'x'), 'EINVAL')
        await rejects(store.readFile(key), 'EINVAL')
      }
      for (const data of [null, undefined, 5, {}, [1, 2], new ArrayBuffer(2)]) await rejects(store.writeFile('k', data), 'EINVAL')
      expect(await store.exists('k')).to.equal(false)
    })

    it('reports a missing key as ENOENT, never as an empty file', async () => {
      const store = t.open()
      const err = await rejects(store.readFile('missing'), 'ENOENT')
      expect(err.message).to.contain('no file named "missing" (key ')
      await store.writeFile('present', '')
      await rejects(store.readFile('other'), 'ENOENT') // a store with shards, key still absent
    })
  })

  describe('put', () => {
    it('returns the SHA-256 of the content and stores it under that key', async () => {
      const store = t.open({ chunkSize: C })
      const data = bytes(3 * C + 5)
      const key = await store.put(data)
      expect(key).to.equal(sha256(data))
      expect((await store.readFile(key)).equals(data)).to.equal(true)
      expect(await store.put('text')).to.equal(sha256('text'))
      expect(await store.put(new Uint8Array([1, 2]))).to.equal(sha256(Buffer.from([1, 2])))
      expect(await store.put(Buffer.alloc(0))).to.equal(sha256(''))
    })

    it('does not write content that is already stored', async () => {
      const store = t.open()
      const key = await store.put('same')
      const before = await store.stat(key)
      await new Promise((resolve) => setTimeout(resolve, 5))
      expect(await store.put('same')).to.equal(key)
      expect((await store.stat(key)).mtime.getTime()).to.equal(before.mtime.getTime())
      expect((await store.usage()).files).to.equal(1)
    })

    it('stores a Readable without buffering it, and dedupes it too', async () => {
      const store = t.open({ chunkSize: C })
      const data = bytes(20 * C + 3)
      const key = await store.put(Readable.from([data.subarray(0, 100), data.subarray(100)]))
      expect(key).to.equal(sha256(data))
      expect((await store.readFile(key)).equals(data)).to.equal(true)
      expect(await store.put(Readable.from([data]))).to.equal(key)
      expect(tmpLeftovers(store.location)).to.deep.equal([])
    })

    it('leaves nothing behind when the Readable fails', async () => {
      const store = t.open({ chunkSize: C })
      const failing = new Readable({
        read () {
          this.push(bytes(C))
          this.destroy(Object.assign(new Error('source broke'), { code: 'ESOURCE' }))
        }
      })
      await rejects(store.put(failing), 'ESOURCE')
      expect(tmpLeftovers(store.location)).to.deep.equal([])
      expect((await store.usage()).files).to.equal(0)
    })

    it('rejects other data with EINVAL', async () => {
      const store = t.open()
      for (const data of [null, undefined, 1, {}, { pipe () {} }]) await rejects(store.put(data), 'EINVAL')
    })
  })

  describe('exists / stat / unlink', () => {
    it('stat reports size, chunks, shard, mtime, SHA-256 and the name of named keys', async () => {
      const store = t.open({ chunkSize: C })
      const before = Date.now()
      await store.writeFile('named', bytes(2 * C + 1))
      const stat = await store.stat('named')
      expect(stat).to.have.keys('key', 'size', 'chunks', 'shard', 'mtime', 'name', 'sha256')
      expect(stat.sha256).to.equal(sha256(bytes(2 * C + 1)))
      expect(stat.size).to.equal(2 * C + 1)
      expect(stat.chunks).to.equal(3)
      expect(stat.shard).to.be.within(0, 255)
      expect(stat.name).to.equal('named')
      expect(stat.mtime.getTime()).to.be.within(before, Date.now())
      const key = await store.put('content')
      expect(await store.stat(key)).to.not.have.property('name')
    })

    it('an empty file exists and has zero chunks', async () => {
      const store = t.open()
      await store.writeFile('empty', '')
      expect(await store.exists('empty')).to.equal(true)
      expect(await store.stat('empty')).to.include({ size: 0, chunks: 0 })
      expect((await store.readFile('empty')).length).to.equal(0)
    })

    it('unlink removes the file and its accounting; missing keys are ENOENT', async () => {
      const store = t.open({ chunkSize: C })
      await store.writeFile('f', bytes(4 * C))
      await store.writeFile('g', bytes(10))
      await store.unlink('f')
      expect(await store.exists('f')).to.equal(false)
      await rejects(store.stat('f'), 'ENOENT')
      await rejects(store.readFile('f'), 'ENOENT')
      await rejects(store.unlink('f'), 'ENOENT')
      await rejects(store.unlink('never'), 'ENOENT')
      expect(await store.usage()).to.include({ used: 10, files: 1 })
    })
  })

  describe('list', () => {
    it('lists every committed file with key, size and name, per shard on request', async () => {
      const store = t.open({ chunkSize: C, referenceId: REF })
      const names = Array.from({ length: 40 }, (_, i) => `file ${i}`)
      for (const [i, name] of names.entries()) await store.writeFile(name, bytes(i * 100))
      const all = await collect(store.list())
      expect(all.map((e) => e.name).sort()).to.deep.equal([...names].sort())
      for (const entry of all) expect(entry.size).to.equal(names.indexOf(entry.name) * 100)
      const first = await store.stat(names[0])
      const inShard = await collect(store.list(first.shard))
      expect(inShard.map((e) => e.key)).to.include(first.key)
      for (const entry of inShard) expect((await store.stat(entry.key)).shard).to.equal(first.shard)
      const total = (await store.usage()).shards.reduce((n, s) => n + (s.files ? 1 : 0), 0)
      expect(total).to.be.above(1)
    })

    it('lists nothing for an empty store or an unused shard', async () => {
      const store = t.open()
      expect(await collect(store.list())).to.deep.equal([])
      expect(await collect(store.list(255))).to.deep.equal([])
    })

    it('rejects shard numbers out of range with EINVAL, synchronously', () => {
      const store = t.open()
      for (const bad of [-1, 256, 1.5, '3', null, NaN]) throws(() => store.list(bad), 'EINVAL')
    })
  })

  describe('usage', () => {
    it('is exact right after writes and across reopen, per shard', async () => {
      const store = t.open({ chunkSize: C, maxTableSize: 256 * 1024 * 1024 })
      await store.writeFile('a', bytes(3000))
      await store.writeFile('b', bytes(5))
      const usage = await store.usage()
      expect(usage).to.include({ used: 3005, files: 2, capacity: 256 * 1024 * 1024, free: 256 * 1024 * 1024 - 3005 })
      for (const shard of usage.shards) {
        expect(shard).to.have.keys('index', 'used', 'free', 'files', 'diskBytes', 'reclaimable', 'trash')
        expect(shard.free).to.equal(1024 * 1024 - shard.used)
      }
      await store.close()
      const again = t.open()
      const reopened = await again.usage()
      expect(reopened).to.include({ used: 3005, files: 2 })
      // The shards made ahead meanwhile are empty.
      const figures = (u) => u.shards.filter((s) => s.files > 0).map((s) => [s.index, s.used, s.files])
      expect(figures(reopened)).to.deep.equal(figures(usage))
      expect(figures(usage)).to.have.length.above(0)
      for (const s of [...usage.shards, ...reopened.shards].filter((s) => s.files === 0)) expect(s.used).to.equal(0)
    })
  })

  describe('usage with every shard in use', function () {
    this.timeout(scaled(120000))

    it('answers from the cache after reopen, without opening any shard', async () => {
      const store = t.open({ referenceId: REF, maxOpenShards: 8 })
      const keys = keysForShards(REF, 256)
      for (const { key } of keys) await store.writeFile(key, key)
      const usage = await store.usage()
      expect(usage.shards).to.have.length(256)
      await store.close()
      // No shard can open (the store opens its shards in the background, and a call
      // that needed one would fail with ECORRUPT): usage() must not need any.
      const aside = path.join(t.dir, 'aside')
      fs.mkdirSync(aside)
      const shardDirs = fs.readdirSync(store.location).filter((name) => /^\d{3}\.s$/.test(name))
      for (const name of shardDirs) fs.renameSync(path.join(store.location, name), path.join(aside, name))
      const again = t.open()
      await again.open()
      const reopened = await again.usage()
      expect(openShardLocks(again.location)).to.equal(0)
      await again.close()
      for (const name of shardDirs) fs.renameSync(path.join(aside, name), path.join(store.location, name))
      expect(reopened).to.deep.equal({ ...usage, shards: reopened.shards })
      expect(reopened.shards.map((s) => [s.index, s.used, s.files])).to.deep.equal(usage.shards.map((s) => [s.index, s.used, s.files]))
      expect(reopened.used).to.equal(256 * 64)
    })
  })

  describe('compact', () => {
    it('reclaims the disk space of removed files', async () => {
      const store = t.open()
      const keys = []
      for (let i = 0; i < 8; i++) keys.push(await store.put(bytes(1024 * 1024, `c${i}`)))
      await store.compact()
      const before = (await store.usage()).shards.reduce((n, s) => n + s.diskBytes, 0)
      for (const key of keys) await store.unlink(key)
      await store.compact()
      const after = (await store.usage()).shards.reduce((n, s) => n + s.diskBytes, 0)
      expect(before).to.be.above(7 * 1024 * 1024)
      expect(after).to.be.below(before / 10)
    })
  })

  describe('options', () => {
    it('rejects bad or unknown options with EINVAL', () => {
      const dir = path.join(t.dir, 's')
      const bad = [
        null, 'x', [], { referenceId: 'abc' }, { referenceId: 5 }, { maxTableSize: 0 }, { maxTableSize: 1.5 },
        { maxTableSize: '1' }, { chunkSize: 0 }, { chunkSize: 2 ** 40 }, { sync: 'yes' }, { maxOpenShards: 0 },
        { maxOpenShards: 257 }, { idleTimeout: -1 }, { maxtablesize: 1024 }, { shardCount: 3 }, { shardCount: 0 },
        { shardCount: 512 }, { shardCount: '1' }
      ]
      for (const options of bad) throws(() => kfs(dir, options), 'EINVAL')
      for (const d of ['', null, 3]) throws(() => kfs(d), 'EINVAL')
      expect(fs.existsSync(dir)).to.equal(false)
    })

    it('persists the reference ID, chunk size and cap, and refuses different ones', async () => {
      const store = t.open({ referenceId: REF.toUpperCase(), chunkSize: 2048, maxTableSize: 256 * 4096 })
      await store.open()
      expect(store.referenceId).to.equal(REF)
      await store.close()
      const same = t.open({ referenceId: REF, chunkSize: 2048, maxTableSize: 256 * 4096 })
      await same.open()
      expect(same.chunkSize).to.equal(2048)
      await same.close()
      await rejects(t.open({ referenceId: 'ff'.repeat(20) }).open(), 'EINVAL')
      await rejects(t.open({ chunkSize: 4096 }).open(), 'EINVAL')
      await rejects(t.open({ maxTableSize: 256 * 8192 }).open(), 'EINVAL')
      const defaults = t.open()
      await defaults.open()
      expect(defaults.referenceId).to.equal(REF)
      expect(defaults.shardCapacity).to.equal(4096)
    })

    it('sync: true writes, overwrites and unlinks like the default', async () => {
      const store = t.open({ sync: true, chunkSize: C })
      await store.writeFile('s', bytes(3 * C))
      await store.writeFile('s', bytes(2 * C, 'again'))
      expect((await store.readFile('s')).equals(bytes(2 * C, 'again'))).to.equal(true)
      await store.unlink('s')
      expect(await store.usage()).to.include({ used: 0, files: 0 })
    })

    it('shardCount: 1 makes a single-LevelDB store holding the whole capacity', async () => {
      const store = t.open({ shardCount: 1, maxTableSize: 1024 * 1024, chunkSize: C })
      for (let i = 0; i < 20; i++) await store.writeFile(`f${i}`, bytes(100))
      const usage = await store.usage()
      expect(usage.shards.map((s) => s.index)).to.deep.equal([0])
      expect(usage).to.include({ capacity: 1024 * 1024, used: 2000, files: 20 })
      expect(store.shardCount).to.equal(1)
      expect(fs.readdirSync(store.location).filter((d) => d.endsWith('.s'))).to.deep.equal(['000.s'])
      throws(() => store.list(1), 'EINVAL')
      await store.close()
      await rejects(t.open({ shardCount: 256 }).open(), 'EINVAL')
      const again = t.open()
      expect((await again.stat('f3')).shard).to.equal(0)
    })

    it('creates a random reference ID when none is given', async () => {
      const a = t.open({}, 'a')
      const b = t.open({}, 'b')
      await Promise.all([a.open(), b.open()])
      expect(a.referenceId).to.match(/^[0-9a-f]{40}$/)
      expect(a.referenceId).to.not.equal(b.referenceId)
    })
  })
})

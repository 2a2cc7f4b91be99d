'use strict'

// Expiry (issue 45, item 1): a file written with { expires } is gone to every reader from
// then on, and the store removes it in bulk by itself (lib/maintenance/expiry.js).
const { expect } = require('chai')
const path = require('node:path')
const { LevelDb } = require('../lib/leveldb/leveldb')
const { shardDirName } = require('../lib/base/shard-names')
const records = require('../lib/shard/records')
const { Collector } = require('../lib/maintenance/expiry')
const { spawn } = require('node:child_process')
const http = require('node:http')
const { Readable } = require('node:stream')
const { useTmp, rejects, throws, bytes, collect, scaled, sleep, within } = require('./helpers')
const { holder } = require('./share-harness')

const C = 1024
const HOUR = 3600 * 1000

// Resolves once `check()` is true, polling; rejects past `ms` (scaled).
async function until (check, ms = 5000, what = 'the condition') {
  const end = Date.now() + scaled(ms)
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}

// fn() on a clock (Date.now) 2 h ahead, past the expiry of files written to expire within
// the hour. A store opened meanwhile keeps that clock for its collector, which takes
// Date.now when it is made: its files are due at once, however long writing them took.
async function clockAhead (fn) {
  const realNow = Date.now
  Date.now = () => realNow() + 2 * HOUR
  try {
    return await fn()
  } finally {
    Date.now = realNow
  }
}

// The records of `range` in shard `index` of the closed store at `dir`.
const shardRecords = (dir, index, range) => inShardDb(dir, index, (db) => collectRange(db, range))

// fn(db) on shard `index` of the closed store at `dir`.
async function inShardDb (dir, index, fn) {
  const db = await LevelDb.open(path.join(dir, shardDirName(index)))
  try {
    return await fn(db)
  } finally {
    await db.close()
  }
}

describe('expiry', () => {
  const t = useTmp()
  const storeDir = () => path.join(t.dir, 'store')

  describe('the expires option', () => {
    const BAD = [['a string', '2030-01-01', 'TypeError'], ['NaN', NaN, 'RangeError'], ['a fraction', 1.5, 'RangeError'], ['an unsafe integer', -(2 ** 60), 'RangeError'],
      ['an invalid Date', new Date('nope'), 'RangeError'], ['a time past 13 digits', 1e13, 'RangeError'], ['null', null, 'TypeError'], ['an object', {}, 'TypeError']]

    for (const [what, value, type] of BAD) {
      it(`${what} is EINVAL on writeFile, put and createWriteStream`, async () => {
        const store = t.open()
        const errors = [
          await rejects(store.writeFile('f', 'x', { expires: value }), 'EINVAL'),
          await rejects(store.put('x', { expires: value }), 'EINVAL'),
          throws(() => store.createWriteStream('f', { expires: value }), 'EINVAL')
        ]
        for (const err of errors) expect(err.name).to.equal(type)
        expect(await store.exists('f')).to.equal(false)
      })
    }

    it('an unknown option beside it is EINVAL', async () => {
      const store = t.open()
      await rejects(store.writeFile('f', 'x', { expire: Date.now() }), 'EINVAL')
      await rejects(store.put('x', { ttl: 5 }), 'EINVAL')
    })

    it('a Date and ms since the epoch are the same expiry, which stat gives back as a Date', async () => {
      const store = t.open()
      const when = new Date(Date.now() + HOUR)
      await store.writeFile('d', 'x', { expires: when })
      await store.writeFile('n', 'x', { expires: when.getTime() })
      expect((await store.stat('d')).expires).to.deep.equal(when)
      expect((await store.stat('n')).expires).to.deep.equal(when)
      await store.writeFile('none', 'x')
      expect(await store.stat('none')).to.not.have.property('expires')
    })
  })

  describe('readers', () => {
    const large = bytes(5 * C + 7)

    // Date.now() moved past the files' expiry, an hour ahead: the collector, made with the
    // real clock, has not removed them, so what hides them is the readers' check.
    const pastExpiry = clockAhead

    for (const [what, data] of [['a file in its head', Buffer.from('small')], ['a file of chunks', large], ['an empty file', Buffer.alloc(0)]]) {
      it(`${what} is gone to every reader from its expiry on, not yet collected`, async () => {
        const store = t.open({ chunkSize: C })
        await store.writeFile('f', data, { expires: Date.now() + HOUR })
        await store.writeFile('live', 'x')
        expect(Buffer.concat([await store.readFile('f')])).to.deep.equal(data)
        await pastExpiry(async () => {
          await rejects(store.readFile('f'), 'ENOENT')
          await rejects(collect(store.createReadStream('f')), 'ENOENT')
          await rejects(collect(store.createReadStream('f', { start: 1, end: 2 })), 'ENOENT')
          expect(await store.exists('f')).to.equal(false)
          await rejects(store.stat('f'), 'ENOENT')
          expect((await collect(store.list())).map((e) => e.key)).to.deep.equal([(await store.stat('live')).key])
        })
        expect((await store.usage()).files).to.equal(2) // counted until collected
      })
    }

    it('a past time is expired at once', async () => {
      const store = t.open({ chunkSize: C })
      await store.writeFile('f', large, { expires: Date.now() - 1 })
      await rejects(store.readFile('f'), 'ENOENT')
      expect(await store.exists('f')).to.equal(false)
    })

    it('expires 0 (1970), a negative time and a Date before 1970 are past too', async () => {
      const store = t.open()
      for (const expires of [0, -1, new Date(-1), new Date('1900-01-01')]) {
        await store.writeFile('f', 'x', { expires })
        expect(await store.exists('f'), String(expires)).to.equal(false)
        const key = await store.put('p', { expires })
        expect(await store.exists(key), String(expires)).to.equal(false)
      }
    })

    it('a file is read until its time, and from then on, with no call, is gone', async () => {
      const store = t.open({ chunkSize: C })
      const expires = Date.now() + scaled(400)
      await store.writeFile('small', 'small', { expires })
      await store.writeFile('large', large, { expires })
      expect(String(await store.readFile('small'))).to.equal('small')
      expect(Buffer.concat(await collect(store.createReadStream('large')))).to.deep.equal(large)
      expect(await store.exists('large')).to.equal(true)
      expect(await collect(store.list())).to.have.length(2)
      await sleep(Math.max(0, expires - Date.now()) / scaled(1) + 5)
      for (const key of ['small', 'large']) {
        await rejects(store.readFile(key), 'ENOENT')
        expect(await store.exists(key)).to.equal(false)
        await rejects(store.stat(key), 'ENOENT')
      }
      expect(await collect(store.list())).to.deep.equal([])
    })

    it('verify neither counts nor calls damage an expired file not yet collected', async () => {
      const store = t.open({ chunkSize: C })
      await store.writeFile('f', large, { expires: Date.now() + HOUR })
      await store.writeFile('live', 'live')
      await store.close()
      // A clock past its expiry: the store opened read-only collects nothing.
      const reader = t.open({ readOnly: true }, 'store')
      await clockAhead(async () => {
        expect(await reader.exists('f')).to.equal(false)
        expect(await reader.verify()).to.deep.equal({ files: 1, bytes: 4, problems: [] })
        expect((await reader.usage()).files).to.equal(2)
      })
    })
  })

  describe('writing again', () => {
    it('replaces the expiry, and a write without one clears it', async () => {
      const store = t.open()
      const soon = Date.now() + HOUR
      await store.writeFile('f', 'a', { expires: soon })
      await store.writeFile('f', 'b', { expires: soon + 1000 })
      expect((await store.stat('f')).expires.getTime()).to.equal(soon + 1000)
      await store.writeFile('f', 'c')
      expect(await store.stat('f')).to.not.have.property('expires')
      await store.writeFile('f', 'd', { expires: Date.now() - 1 })
      expect(await store.exists('f')).to.equal(false)
      await store.writeFile('f', 'e')
      expect(String(await store.readFile('f'))).to.equal('e')
    })

    it('through a stream, with sha256 and size', async () => {
      const store = t.open({ chunkSize: C })
      const data = bytes(3 * C)
      const expires = new Date(Date.now() + HOUR)
      const ws = store.createWriteStream('s', { expires, size: data.length })
      await new Promise((resolve, reject) => ws.on('error', reject).on('finish', resolve).end(data))
      expect((await store.stat('s')).expires).to.deep.equal(expires)
    })

    it('put of content held with another expiry sets the expiry asked; with the same, writes nothing', async () => {
      const store = t.open()
      const later = Date.now() + 2 * HOUR
      const key = await store.put('piece', { expires: later })
      const { mtime } = await store.stat(key)
      await sleep(5)
      await store.put('piece', { expires: later })
      expect((await store.stat(key)).mtime).to.deep.equal(mtime) // not written again
      const sooner = Date.now() + HOUR
      await store.put('piece', { expires: sooner })
      expect((await store.stat(key)).expires.getTime()).to.equal(sooner)
      await store.put('piece')
      expect(await store.stat(key)).to.not.have.property('expires')
    })

    it('put without an expiry of content held but expired stores it for good', async () => {
      const store = t.open()
      const key = await store.put('piece', { expires: Date.now() - 1 })
      expect(await store.exists(key)).to.equal(false)
      await store.put('piece', { expires: Date.now() - 1 })
      await store.put('piece')
      expect(String(await store.readFile(key))).to.equal('piece')
    })

    it('keeps one expiry record per file, of its version, through overwrites and unlinks', async () => {
      const store = t.open()
      const far = Date.now() + HOUR
      await store.writeFile('f', 'a', { expires: far })
      await store.writeFile('f', 'b', { expires: far })
      await store.writeFile('f', 'c', { expires: far + 1 })
      await store.writeFile('g', 'c', { expires: far })
      await store.unlink('g')
      await store.writeFile('h', 'c', { expires: far })
      await store.writeFile('h', 'c')
      const shard = (await store.stat('f')).shard
      const key = (await store.stat('f')).key
      await store.close()
      const index = await shardRecords(storeDir(), shard, records.expiryRange())
      const meta = JSON.parse((await shardRecords(storeDir(), shard, { gte: records.metaKey(key), lte: records.metaKey(key) }))[0].value)
      expect(index.filter((e) => e.key.endsWith(' ' + key))).to.deep.equal([{ key: records.expiryKey(far + 1, key), value: meta.version }])
      // g and h, in whichever shards they are, left none.
      const all = []
      for (const s of new Set([shard, ...(await indices())])) all.push(...(await shardRecords(storeDir(), s, records.expiryRange())))
      expect(all).to.have.length(1)
    })

    async function indices () {
      const store = t.open({ readOnly: true }, 'store')
      const found = [(await store.stat('h')).shard]
      await store.close()
      return found
    }
  })

  describe('collection', () => {
    it('removes expired files by itself, gives their bytes and count back, and leaves live ones', async () => {
      const store = t.open({ chunkSize: C })
      const data = bytes(3 * C)
      const expires = Date.now() + scaled(2000)
      for (let i = 0; i < 30; i++) await store.writeFile(`gone${i}`, data, { expires })
      for (let i = 0; i < 5; i++) await store.writeFile(`kept${i}`, data, { expires: Date.now() + HOUR })
      await store.writeFile('forever', data)
      await until(async () => (await store.metrics()).expiries.files === 30, 5000, 'the collection')
      const usage = await store.usage()
      expect(usage.files).to.equal(6)
      expect(usage.used).to.equal(6 * data.length)
      expect(usage.reclaimable).to.be.at.least(30 * data.length) // the Reclaimer gives it back
      expect((await store.metrics()).expiries.runs).to.be.at.least(1)
      expect((await collect(store.list())).map((e) => e.name).sort()).to.deep.equal(['forever', 'kept0', 'kept1', 'kept2', 'kept3', 'kept4'])
      expect((await store.verify()).problems).to.deep.equal([])
    })

    it('removes more files than one batch holds', async () => {
      const store = t.open({ shardCount: 1 })
      await Promise.all(Array.from({ length: 2500 }, (_, i) => store.put(`p${i}`, { expires: Date.now() + HOUR })))
      await store.close()
      await clockAhead(async () => {
        const again = t.open({}, 'store')
        await until(async () => (await again.metrics()).expiries.files >= 2500, 10000, 'the collection')
        // In one collection, batch after batch.
        expect((await again.metrics()).expiries).to.deep.equal({ runs: 1, files: 2500 })
        expect((await again.usage()).files).to.equal(0)
        await again.close()
      })
    })

    it('an expiry record naming a version replaced since removes nothing, and goes', async () => {
      const store = t.open()
      await store.writeFile('f', 'live')
      const { shard, key } = await store.stat('f')
      await store.close()
      const stale = records.expiryKey(Date.now() - 1000, key)
      await inShardDb(storeDir(), shard, (db) => db.batch([{ type: 'put', key: stale, value: '0123456789abcdef' }]))
      const again = t.open({}, 'store')
      expect(String(await again.readFile('f'))).to.equal('live') // opens its shard
      await sleep(300)
      expect(String(await again.readFile('f'))).to.equal('live')
      expect((await again.metrics()).expiries.files).to.equal(0)
      await again.close()
      expect(await shardRecords(storeDir(), shard, records.expiryRange())).to.deep.equal([])
    })

    it('collects the files of a shard closed with files due, opening it when they are', async () => {
      const store = t.open({ idleTimeout: 1 })
      const expires = Date.now() + scaled(800)
      await store.writeFile('f', 'x', { expires })
      await store.close()
      // Reopened: the shard stays closed, its expiry known from the usage cache.
      const again = t.open({ openAhead: false }, 'store')
      await again.open()
      expect((await again.metrics()).shardsOpen).to.equal(0)
      await until(async () => (await again.metrics()).expiries.files === 1, 5000, 'the collection')
      expect((await again.usage()).files).to.equal(0)
    })

    // Each shard's usage record in the closed store at `dir` made by change(record).
    async function changeUsage (dir, change) {
      const state = await LevelDb.open(path.join(dir, 'state'))
      try {
        for await (const { key, value } of state.scan({ gt: 'usage!', lt: 'usage!\xff', keyAsBuffer: false, valueAsBuffer: false })) {
          await state.put(key, JSON.stringify(change(JSON.parse(value))))
        }
      } finally {
        await state.close()
      }
    }

    const untrusted = [
      ['left marked open by a process that died', (record) => ({ ...record, open: true })],
      ['written by an older kfs, without nextExpiry', (record) => ({ ...record, nextExpiry: undefined })] // dropped by JSON
    ]
    for (const [what, change] of untrusted) {
      it(`collects the files due of a shard whose usage record was ${what}, without openAhead`, async () => {
        const again = await reopenedPastExpiry(change)
        await until(async () => (await again.metrics()).expiries.files === 1, 5000, 'the collection')
        expect((await again.metrics()).shardOpens).to.equal(1) // its own, to collect
        await again.close()
      })
    }

    // f written to expire in an hour, the usage records changed by `change`, the store
    // opened again on a clock 2 h ahead without openAhead: resolves to it.
    async function reopenedPastExpiry (change, between = async () => {}) {
      const store = t.open()
      await store.writeFile('f', 'x', { expires: Date.now() + HOUR })
      await store.writeFile('live', 'y')
      const { shard } = await store.stat('f')
      await store.close()
      await changeUsage(storeDir(), change)
      await between(shard)
      return clockAhead(async () => {
        const again = t.open({ openAhead: false }, 'store')
        await again.open()
        return again
      })
    }

    it('a shard left open by a crash, with no file due, stays closed: its expiry index is read from its files', async () => {
      const store = t.open()
      await store.writeFile('g', 'y')
      await store.close()
      await changeUsage(storeDir(), (record) => ({ ...record, open: true }))
      const again = t.open({ openAhead: false }, 'store')
      await again.open()
      await sleep(300)
      expect((await again.metrics()).shardOpens).to.equal(0)
    })

    it('a shard left open by a crash whose files cannot be read without LevelDB (a compressed block) is opened to collect its files due', async () => {
      const leveldown = require('leveldown')
      const again = await reopenedPastExpiry((record) => ({ ...record, open: true }), async (shard) => {
        // A record beside the expiry index that snappy compresses, in a table compacted so.
        const db = leveldown(path.join(storeDir(), shardDirName(shard)))
        const call = (fn) => new Promise((resolve, reject) => fn((err) => (err ? reject(err) : resolve())))
        await call((cb) => db.open({ compression: true }, cb))
        await call((cb) => db.put('!d~', 'v'.repeat(3000), cb))
        await call((cb) => db.compactRange('!', '\xff', cb))
        await call((cb) => db.close(cb))
      })
      await until(async () => (await again.metrics()).expiries.files === 1, 5000, 'the collection')
      await again.close()
    })

    it('a shard that has no file due, its record trusted, stays closed', async () => {
      const store = t.open()
      await store.writeFile('f', 'x', { expires: Date.now() + HOUR })
      await store.writeFile('g', 'y')
      await store.close()
      const again = t.open({ openAhead: false }, 'store')
      await again.open()
      await sleep(300)
      expect((await again.metrics()).shardOpens).to.equal(0)
    })

    it('a store opened read-only collects nothing, and still hides expired files', async () => {
      const store = t.open()
      await store.writeFile('f', 'x', { expires: Date.now() + scaled(200) })
      await store.close()
      const reader = t.open({ readOnly: true }, 'store')
      await reader.open()
      await sleep(600)
      expect((await reader.metrics()).shardOpens).to.equal(0) // no collection opened its shard
      expect(await reader.exists('f')).to.equal(false)
      expect((await reader.metrics()).expiries.files).to.equal(0)
      expect((await reader.usage()).files).to.equal(1)
    })

    it('no timer keeps a process alive: a process with a file expiring in an hour exits', async () => {
      const script = `
        const store = require('./')(process.argv[1])
        store.writeFile('f', 'x', { expires: Date.now() + 3600000 })`
      const child = spawn(process.execPath, ['-e', script, storeDir()], { cwd: path.join(__dirname, '..'), stdio: 'inherit' })
      const exited = new Promise((resolve) => child.once('exit', resolve))
      try {
        expect(await within(exited, 10000, 'the process to exit')).to.equal(0)
      } finally {
        child.kill('SIGKILL')
      }
      const again = t.open({}, 'store')
      expect((await again.stat('f')).expires).to.be.a('date')
    })
  })

  describe('the Collector alone, on a fake clock', () => {
    function fakeShards (times) {
      const shards = times.map((nextExpiry, index) => ({ index, nextExpiry, collected: [] }))
      for (const shard of shards) {
        shard.collectExpired = async (now) => {
          shard.collected.push(now)
          shard.nextExpiry = undefined
          return { files: 1, more: false }
        }
      }
      return shards
    }

    it('collects, at the time asked, only the shards with files due, closed ones among them', async () => {
      let now = 1000
      const shards = fakeShards([500, 2000, undefined])
      const leased = []
      const closed = new Map([[7, 900], [8, 5000]])
      const collector = new Collector({
        openShards: () => shards,
        closedExpiries: () => [...closed],
        inShard: async (index, fn) => {
          leased.push(index)
          closed.delete(index) // opened
          return fn(shards[index] || { collectExpired: async () => ({ files: 1, more: false }) })
        },
        now: () => now
      })
      expect(await collector.collectNow()).to.equal(2)
      expect(leased).to.deep.equal([0, 7])
      now = 2000
      expect(await collector.collectNow()).to.equal(1)
      expect(shards[1].collected).to.deep.equal([2000])
      expect(collector.files).to.equal(3)
      await collector.stop()
    })

    it('takes batches while a shard says more are due, and a failure leaves the others collected', async () => {
      let calls = 0
      const bad = { index: 0, nextExpiry: 1 }
      const good = { index: 1, nextExpiry: 2, collectExpired: async () => ({ files: 1000, more: ++calls < 3 }) }
      const collector = new Collector({
        openShards: () => [bad, good],
        inShard: async (index, fn) => {
          if (index === 0) throw Object.assign(new Error('busy'), { code: 'EBUSY' })
          return fn(good)
        },
        now: () => 10
      })
      await rejects(collector.collectNow(), 'EBUSY')
      expect(collector.files).to.equal(3000)
      await collector.stop()
    })

    it('counts the files removed as each batch is made, not at the end of a pass over the shards', async () => {
      let release
      const held = new Promise((resolve) => { release = resolve })
      const first = { index: 0, nextExpiry: 1, collectExpired: async () => ({ files: 5, more: false }) }
      const second = { index: 1, nextExpiry: 2, collectExpired: async () => held.then(() => ({ files: 7, more: false })) }
      const collector = new Collector({ openShards: () => [first, second], inShard: async (index, fn) => fn([first, second][index]), now: () => 10 })
      const pass = collector.collectNow()
      await new Promise((resolve) => setImmediate(resolve))
      expect(collector.files, 'the first shard collected, the second still at it').to.equal(5)
      release()
      expect(await pass).to.equal(12)
      expect(collector.files).to.equal(12)
      await collector.stop()
    })

    it('collects four shards at once, each its own LevelDB, the soonest due first', async () => {
      let inFlight = 0
      let most = 0
      const started = []
      const shards = Array.from({ length: 9 }, (_, index) => ({ index, nextExpiry: 100 - index, collectExpired: async () => ({ files: 1, more: false }) }))
      const collector = new Collector({
        openShards: () => shards,
        inShard: async (index, fn) => {
          started.push(index)
          most = Math.max(most, ++inFlight)
          await new Promise((resolve) => setTimeout(resolve, 5))
          inFlight--
          return fn(shards[index])
        },
        now: () => 1000
      })
      expect(await collector.collectNow()).to.equal(9)
      expect(most).to.equal(4)
      expect(started).to.deep.equal([8, 7, 6, 5, 4, 3, 2, 1, 0])
      await collector.stop()
    })

    it('a shard that fails is tried again after 10 s, then twice as long each time up to 10 min; noted again, at once', async () => {
      let now = 1000
      let tries = 0
      const collector = new Collector({
        openShards: () => [],
        closedExpiries: () => [[3, 500]],
        inShard: async () => {
          tries++
          throw Object.assign(new Error('damaged'), { code: 'ECORRUPT' })
        },
        now: () => now
      })
      await rejects(collector.collectNow(), 'ECORRUPT')
      for (const wait of [10, 20, 40, 80, 160, 320, 600, 600].map((s) => s * 1000)) {
        const before = tries
        now += wait - 1
        expect(await collector.collectNow(), `${wait - 1} ms after`).to.equal(0)
        expect(tries).to.equal(before)
        now += 1
        await rejects(collector.collectNow(), 'ECORRUPT')
        expect(tries, `${wait} ms after`).to.equal(before + 1)
      }
      // A repair notes it again: its timer fires at once, and the next try waits 10 s again.
      const before = tries
      collector.note(3, 500)
      await until(() => tries === before + 1, 2000, 'the try')
      now += 10000 - 1
      expect(await collector.collectNow()).to.equal(0)
      expect(tries).to.equal(before + 1)
      await collector.stop()
    })

    it('a shard noted, then found open with no file to expire, is not opened again once it closed', async () => {
      const open = [{ index: 4, nextExpiry: undefined }]
      const leased = []
      const collector = new Collector({
        openShards: () => open,
        inShard: async (index) => {
          leased.push(index)
          return { files: 0, more: false }
        },
        now: () => 1000
      })
      collector.note(4, 1000) // as a store notes a shard with figures not trusted
      await sleep(20)
      expect(await collector.collectNow()).to.equal(0)
      open.length = 0 // closed
      expect(await collector.collectNow()).to.equal(0)
      expect(leased).to.deep.equal([])
      await collector.stop()
    })

    it('disabled (read-only), notes set no timer', async () => {
      const shards = fakeShards([1])
      const collector = new Collector({ openShards: () => shards, inShard: async (i, fn) => fn(shards[i]), enabled: false })
      collector.note(0, 1)
      await sleep(50)
      expect(shards[0].collected).to.deep.equal([])
    })
  })

  describe('verify and repair', () => {
    it('a lost expiry record is damage verify names and repair makes again; the file then expires and is collected', async () => {
      const store = t.open()
      await store.writeFile('f', 'x', { expires: Date.now() + HOUR })
      await store.writeFile('g', 'y', { expires: Date.now() + 3 * HOUR })
      const { shard, key } = await store.stat('f')
      await store.close()
      await inShardDb(storeDir(), shard, async (db) => {
        const all = await collectRange(db, records.expiryRange())
        await db.batch(all.filter((e) => e.key.endsWith(' ' + key)).map((e) => ({ type: 'del', key: e.key })))
      })
      const again = await clockAhead(async () => {
        const reopened = t.open({}, 'store')
        await reopened.open()
        return reopened
      })
      const { problems } = await again.verify()
      expect(problems).to.have.length(1)
      expect(problems[0]).to.include({ shard, key, kind: 'expiry' })
      expect(problems[0].problem).to.contain('never be removed')
      await again.repair(shard)
      expect((await again.verify()).problems).to.deep.equal([])
      await until(async () => (await again.metrics()).expiries.files === 1, 5000, 'the collection')
      expect((await again.usage()).files).to.equal(1) // g
      await again.close()
      expect((await shardRecords(storeDir(), shard, records.metaRange())).map((e) => e.key)).to.not.include(records.metaKey(key))
    })

    it('a repaired shard\'s files due are collected, the shard closed', async () => {
      const store = t.open({ openAhead: false })
      await store.writeFile('f', 'x', { expires: Date.now() + scaled(1500) })
      const { shard } = await store.stat('f')
      await store.close()
      const again = t.open({ openAhead: false }, 'store')
      await again.repair(shard)
      await until(async () => (await again.metrics()).expiries.files === 1, 5000, 'the collection')
    })
  })

  describe('a process crash during a collection', () => {
    // A collection is batches in one shard's log, each atomic and, once made, in the OS:
    // a process that dies leaves the batches made before. The store is copied before the
    // first batch and after each, in the shard's exclusive section, with the reclaimer off
    // so that nothing else writes meanwhile: every such state is opened. Power cuts, which
    // may undo unsynced batches, are the crash-states workload "expiry collection"
    // (test/crash/workloads.js, test/system/crash-states-2.test.js).
    it('never makes an expired file readable again, nor loses a live one', async () => {
      const { Shard } = require('../lib/shard/shard')
      const fs = require('node:fs')
      const store = t.open({ shardCount: 1, reclaim: false })
      const expires = Date.now() + scaled(3000)
      const expiring = Array.from({ length: 2500 }, (_, i) => `p${i}`)
      const keys = await Promise.all(expiring.map((data) => store.put(data, { expires })))
      for (let i = 0; i < 10; i++) await store.writeFile(`live${i}`, `live ${i}`, { expires: i % 2 ? Date.now() + HOUR : undefined })
      const cuts = []
      const cut = () => {
        const to = path.join(t.dir, `cut${cuts.length}`)
        fs.cpSync(storeDir(), to, { recursive: true, filter: (from) => !from.endsWith('kfs.sock') })
        cuts.push(path.basename(to))
      }
      const collect = Shard.prototype.collectExpired
      Shard.prototype.collectExpired = async function (...args) {
        if (!cuts.length) cut()
        const done = await collect.apply(this, args)
        cut()
        return done
      }
      try {
        await until(async () => (await store.usage()).files === 10, 10000, 'the collection')
      } finally {
        Shard.prototype.collectExpired = collect
      }
      await store.close()
      expect(cuts.length).to.be.at.least(4) // before, and after each of 3 batches
      for (const name of cuts) {
        const again = t.open({}, name)
        for (let i = 0; i < 10; i++) expect(String(await again.readFile(`live${i}`)), name).to.equal(`live ${i}`)
        for (const key of keys) expect(await again.exists(key), `${name}: ${key}`).to.equal(false)
        await until(async () => (await again.usage()).files === 10, 10000, `the collection in ${name}`)
        expect((await again.verify()).problems, name).to.deep.equal([])
        await again.close()
      }
    })
  })

  describe('through a holder', () => {
    // A request's answer: status and JSON body.
    const request = (socket, method, url, body) => new Promise((resolve, reject) => {
      const req = http.request({ socketPath: socket, method, path: url, agent: false }, (res) => {
        const parts = []
        res.on('data', (part) => parts.push(part)).on('end', () => resolve({ status: res.statusCode, body: JSON.parse(Buffer.concat(parts).toString('utf8')) }))
      })
      req.on('error', reject)
      req.end(body)
    })

    it('the holder takes expires as 1 to 13 digits only, else 400 EINVAL and nothing written', async () => {
      const held = await holder(storeDir())
      try {
        const socket = path.join(storeDir(), 'kfs.sock')
        for (const bad of ['', '1e3', '%2012%20', '-1', '1.5', '12345678901234', 'x']) {
          for (const [method, url] of [['PUT', `/v2/files/k?expires=${bad}`], ['POST', `/v2/put?expires=${bad}`]]) {
            const answer = await request(socket, method, url, 'data')
            expect(answer.status, url).to.equal(400)
            expect(answer.body.error, url).to.include({ code: 'EINVAL', argument: 'expires' })
          }
        }
        const store = t.open({}, 'store')
        expect(await store.exists('k')).to.equal(false)
        expect(await store.exists(require('node:crypto').createHash('sha256').update('data').digest('hex'))).to.equal(false)
        const when = Date.now() + HOUR
        expect((await request(socket, 'PUT', `/v2/files/k?expires=${when}`, 'data')).status).to.equal(200)
        expect((await store.stat('k')).expires).to.deep.equal(new Date(when))
        await store.close()
      } finally {
        await held.stop()
      }
    })

    // A holder of an older kfs serves /v1 alone, and answers any other path as main's
    // lib/share/server.js does: 400 EINVAL naming the path, the body unread.
    async function olderHolder (socket) {
      const seen = []
      const serve = (req, res) => {
        seen.push(`${req.method} ${req.url}`)
        const answer = (status, body) => {
          res.writeHead(status, { 'content-type': 'application/json' })
          res.end(JSON.stringify(body))
        }
        const pathname = req.url.split('?')[0]
        if (!pathname.startsWith('/v1/')) {
          return answer(400, { error: { code: 'EINVAL', name: 'RangeError', argument: 'path', message: `path ${pathname} is not a path of this protocol (/v1/... or /metrics)` } })
        }
        if (req.headers.expect === '100-continue') res.writeContinue()
        const parts = []
        req.on('data', (part) => parts.push(part)).on('end', () => {
          const data = Buffer.concat(parts)
          const sha256 = require('node:crypto').createHash('sha256').update(data).digest('hex')
          answer(200, { result: pathname === '/v1/put' ? sha256 : { key: 'k', size: data.length, sha256 } })
        })
      }
      const server = http.createServer(serve).on('checkContinue', serve)
      await new Promise((resolve) => server.listen(socket, resolve))
      return { seen, close: () => new Promise((resolve) => server.close(resolve)) }
    }

    it('a write with expires through a holder of an older kfs is ENOTSUP, nothing sent; one without is served as before', async () => {
      const { Remote } = require('../lib/share/client')
      const socket = path.join(t.dir, 'kfs.sock')
      const older = await olderHolder(socket)
      try {
        const remote = new Remote(socket)
        const expires = Date.now() + HOUR
        const failures = [
          await rejects(remote.writeFile({ key: 'k' }, Buffer.from('data'), { expires }), 'ENOTSUP'),
          await rejects(remote.put(Buffer.from('data'), { expires }), 'ENOTSUP'),
          await rejects(remote.put(Readable.from([Buffer.from('data')]), { expires }), 'ENOTSUP'),
          await rejects((async () => {
            const writer = await remote.openWriter({ key: 's' }, { expires })
            await writer.write(Buffer.from('data'))
            await writer.finish()
          })(), 'ENOTSUP')
        ]
        for (const err of failures) expect(err.message).to.match(/older kfs, which does not know expires/)
        expect(older.seen.filter((line) => line.startsWith('PUT /v1') || line.startsWith('POST /v1'))).to.deep.equal([])
        await remote.writeFile({ key: 'k' }, Buffer.from('data'))
        expect(await remote.put(Buffer.from('data'))).to.have.length(64)
        const writer = await remote.openWriter({ key: 's' }, {})
        await writer.write(Buffer.from('data'))
        await writer.finish()
        expect(older.seen.slice(-3)).to.deep.equal(['PUT /v1/files/k', 'POST /v1/put', 'PUT /v1/files/s'])
      } finally {
        await older.close()
      }
    })

    it('expires crosses the socket on writeFile, put and streams; stat gives it back as a Date', async () => {
      const held = await holder(storeDir())
      try {
        const remote = t.open({}, 'store')
        const when = new Date(Date.now() + HOUR)
        await remote.writeFile('f', 'x', { expires: when })
        const key = await remote.put('piece', { expires: when.getTime() })
        const ws = remote.createWriteStream('s', { expires: when })
        await new Promise((resolve, reject) => ws.on('error', reject).on('finish', resolve).end('stream'))
        expect(remote.heldBy).to.equal(held.child.pid)
        for (const k of ['f', key, 's']) expect((await remote.stat(k)).expires).to.deep.equal(when)
        await remote.writeFile('gone', 'x', { expires: Date.now() - 1 })
        expect(await remote.exists('gone')).to.equal(false)
        await rejects(remote.writeFile('f', 'x', { expires: 'soon' }), 'EINVAL')
        await remote.close()
      } finally {
        await held.stop()
      }
    })
  })
})

async function collectRange (db, range) {
  const found = []
  for await (const entry of db.scan({ ...range, valueAsBuffer: false })) found.push(entry)
  return found
}

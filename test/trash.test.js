'use strict'

// Trash (issue 45, item 2): trash(key) hides a file from every reader until restoreTrash()
// brings every trashed file back with one synced write, or emptyTrash() / trashDays remove
// it for good (lib/maintenance/trash.js).
const { expect } = require('chai')
const fs = require('node:fs')
const path = require('node:path')
const { spawn } = require('node:child_process')
const { LevelDb } = require('../lib/leveldb/leveldb')
const { Shard } = require('../lib/shard/shard')
const { shardDirName } = require('../lib/base/shard-names')
const records = require('../lib/shard/records')
const { metricsText } = require('../lib/api/prometheus')
const { useTmp, rejects, bytes, collect, scaled } = require('./helpers')
const { holder, ROOT } = require('./share-harness')

const C = 1024
const DAY = 24 * 3600 * 1000

async function until (check, ms, what) {
  const end = Date.now() + scaled(ms)
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}

async function shardRecords (dir, index, range, valueAsBuffer = false) {
  const db = await LevelDb.open(path.join(dir, shardDirName(index)))
  try {
    const found = []
    for await (const entry of db.scan({ ...range, valueAsBuffer })) found.push(entry)
    return found
  } finally {
    await db.close()
  }
}

// A store of `n` files f0.. of sizes 700 + i (one chunk: data in the head) or, for odd i
// with `large`, 3 chunks.
async function withFiles (store, n, { large = false } = {}) {
  const files = {}
  for (let i = 0; i < n; i++) {
    files[`f${i}`] = bytes(large && i % 2 ? 3 * C - 7 : 700 + i, `f${i}`)
    await store.writeFile(`f${i}`, files[`f${i}`])
  }
  return files
}

describe('trash', () => {
  const t = useTmp()
  const storeDir = () => path.join(t.dir, 'store')

  describe('arguments', () => {
    it('trash(key): bad keys and extra arguments are EINVAL; a missing file ENOENT', async () => {
      const store = t.open({ chunkSize: C })
      await rejects(store.trash(), 'EINVAL')
      await rejects(store.trash(''), 'EINVAL')
      await rejects(store.trash('a', {}), 'EINVAL')
      await rejects(store.trash('missing'), 'ENOENT')
    })

    it('emptyTrash: before is a Date or ms; anything else, or another option, EINVAL; restoreTrash takes no argument', async () => {
      const store = t.open({ chunkSize: C })
      for (const bad of [{ before: 'soon' }, { before: new Date('nope') }, { before: 1.5 }, { after: 1 }, 'x', null]) {
        await rejects(store.emptyTrash(bad), 'EINVAL')
      }
      await rejects(store.emptyTrash({}, 1), 'EINVAL')
      await rejects(store.restoreTrash(1), 'EINVAL')
      expect(await store.emptyTrash({ before: new Date() })).to.deep.equal({ files: 0, bytes: 0 })
      expect(await store.emptyTrash({ before: Date.now() })).to.deep.equal({ files: 0, bytes: 0 })
      expect(await store.emptyTrash({ before: new Date(-1) })).to.deep.equal({ files: 0, bytes: 0 }) // before 1970: nothing was trashed before it
    })

    it('the trashDays option is a number of days from 0 to 36500', () => {
      const kfs = require('..')
      for (const bad of [-1, 'x', Infinity, 40000]) expect(() => kfs(storeDir(), { trashDays: bad }), String(bad)).to.throw().with.property('code', 'EINVAL')
      expect(() => kfs(storeDir(), { trashDays: 0.5 })).to.not.throw()
    })
  })

  describe('readers', () => {
    it('a trashed file is absent to readFile, ranges, streams, exists, stat and list; unlink and trash again are ENOENT', async () => {
      const store = t.open({ chunkSize: C })
      const files = await withFiles(store, 4, { large: true })
      await store.trash('f0') // data in its head
      await store.trash('f1') // 3 chunks
      for (const key of ['f0', 'f1']) {
        await rejects(store.readFile(key), 'ENOENT')
        await rejects(collect(store.createReadStream(key)), 'ENOENT')
        await rejects(collect(store.createReadStream(key, { start: 1, end: 5 })), 'ENOENT')
        expect(await store.exists(key)).to.equal(false)
        await rejects(store.stat(key), 'ENOENT')
        await rejects(store.unlink(key), 'ENOENT')
        await rejects(store.trash(key), 'ENOENT')
      }
      expect((await collect(store.list())).map((f) => f.name).sort()).to.deep.equal(['f2', 'f3'])
      expect((await store.readFile('f2')).equals(files.f2)).to.equal(true)
      // From a closed shard's files too (list reads them without opening the shard).
      await store.close()
      const again = t.open({ chunkSize: C, openAhead: false })
      expect((await collect(again.list())).map((f) => f.name).sort()).to.deep.equal(['f2', 'f3'])
      await rejects(again.readFile('f0'), 'ENOENT')
    })

    it('writing a trashed key again makes a live file, out of the trash', async () => {
      const store = t.open({ chunkSize: C })
      await withFiles(store, 2)
      await store.trash('f0')
      await store.trash('f1')
      await store.writeFile('f0', 'new')
      expect(String(await store.readFile('f0'))).to.equal('new')
      expect((await store.usage()).trash).to.deep.equal({ files: 1, bytes: 701 })
      expect(await store.restoreTrash()).to.deep.equal({ files: 1, bytes: 701 })
      expect(String(await store.readFile('f0'))).to.equal('new')
    })

    it('put of content in the trash writes it again, out of the trash', async () => {
      const store = t.open({ chunkSize: C })
      const key = await store.put('piece')
      await store.trash(key)
      expect(await store.put('piece')).to.equal(key)
      expect(String(await store.readFile(key))).to.equal('piece')
      expect((await store.usage()).trash).to.deep.equal({ files: 0, bytes: 0 })
    })

    it('an expired file cannot be trashed (ENOENT)', async () => {
      const store = t.open({ chunkSize: C })
      await store.writeFile('e', 'x', { expires: Date.now() - 1 })
      await rejects(store.trash('e'), 'ENOENT')
    })
  })

  describe('restore', () => {
    it('brings every trashed file back whole, counted; a restored file can be trashed again', async () => {
      const store = t.open({ chunkSize: C })
      const files = await withFiles(store, 6, { large: true })
      for (const key of ['f0', 'f1', 'f2']) await store.trash(key)
      const bytesIn = [0, 1, 2].reduce((sum, i) => sum + files[`f${i}`].length, 0)
      expect(await store.restoreTrash()).to.deep.equal({ files: 3, bytes: bytesIn })
      for (const [key, data] of Object.entries(files)) expect((await store.readFile(key)).equals(data), key).to.equal(true)
      expect((await collect(store.list())).length).to.equal(6)
      expect(await store.restoreTrash()).to.deep.equal({ files: 0, bytes: 0 })
      await store.trash('f1')
      await rejects(store.readFile('f1'), 'ENOENT')
      expect((await store.usage()).trash).to.deep.equal({ files: 1, bytes: files.f1.length })
      expect((await store.verify()).problems).to.deep.equal([])
    })

    it('brings back a file an earlier process trashed on a clock ahead of this one\'s', async () => {
      const store = t.open({ chunkSize: C })
      await withFiles(store, 2)
      const { now } = Date
      Date.now = () => now() + DAY
      try {
        await store.trash('f0')
      } finally {
        Date.now = now
      }
      await store.close()
      for (const openAhead of [true, false]) {
        const again = t.open({ chunkSize: C, openAhead }, 'store')
        await again.trash('f1')
        expect(await again.restoreTrash()).to.deep.equal({ files: 2, bytes: 1401 })
        expect(await again.exists('f0')).to.equal(true)
        expect(await again.exists('f1')).to.equal(true)
        await again.close()
        if (openAhead) {
          Date.now = () => now() + DAY
          const ahead = t.open({ chunkSize: C }, 'store')
          await ahead.trash('f0').finally(() => { Date.now = now })
          await ahead.close()
        }
      }
    })

    it('counts closed shards from the usage cache, and survives a reopen of the store', async () => {
      const store = t.open({ chunkSize: C })
      const files = await withFiles(store, 5)
      await store.trash('f3')
      await store.close()
      const again = t.open({ chunkSize: C, openAhead: false })
      expect((await again.usage()).trash).to.deep.equal({ files: 1, bytes: files.f3.length })
      expect(await again.restoreTrash()).to.deep.equal({ files: 1, bytes: files.f3.length })
      await again.close()
      const third = t.open({ chunkSize: C })
      expect((await third.readFile('f3')).equals(files.f3)).to.equal(true)
      expect((await third.usage()).trash).to.deep.equal({ files: 0, bytes: 0 })
    })
  })

  describe('empty', () => {
    it('removes for good the files trashed before `before`; without it, all; the space is freed', async () => {
      const store = t.open({ chunkSize: C })
      const files = await withFiles(store, 4, { large: true })
      await store.trash('f0')
      await store.trash('f1')
      const between = Date.now() + 1
      while (Date.now() <= between) await new Promise((resolve) => setTimeout(resolve, 2))
      await store.trash('f2')
      const used = (await store.usage()).used
      expect(await store.emptyTrash({ before: new Date(between) })).to.deep.equal({ files: 2, bytes: files.f0.length + files.f1.length })
      expect((await store.usage()).used).to.equal(used - files.f0.length - files.f1.length)
      expect((await store.usage()).trash).to.deep.equal({ files: 1, bytes: files.f2.length })
      expect(await store.restoreTrash()).to.deep.equal({ files: 1, bytes: files.f2.length })
      expect(await store.exists('f0')).to.equal(false)
      expect((await store.readFile('f2')).equals(files.f2)).to.equal(true)
      await store.trash('f3')
      expect(await store.emptyTrash()).to.deep.equal({ files: 1, bytes: files.f3.length })
      expect((await collect(store.list())).map((f) => f.name)).to.deep.equal(['f2'])
      expect((await store.verify()).problems).to.deep.equal([])
      expect((await store.usage()).files).to.equal(1)
    })

    it('empties more than one batch of a shard', async () => {
      const store = t.open({ chunkSize: C, shardCount: 1 })
      const keys = Array.from({ length: 1100 }, (_, i) => `k${i}`)
      await Promise.all(keys.map((key) => store.writeFile(key, 'x')))
      for (const key of keys) await store.trash(key)
      expect(await store.emptyTrash()).to.deep.equal({ files: 1100, bytes: 1100 })
      expect((await store.usage()).files).to.equal(0)
    })

    it('a collection of expired files does not lease a shard again to empty a trash it has none of, or none old enough', async () => {
      const store = t.open({ chunkSize: C, shardCount: 4 })
      for (let i = 0; i < 8; i++) await store.writeFile(`x${i}`, `expired ${i}`, { expires: Date.now() - 1 })
      await store.writeFile('kept', 'in the trash, not old enough')
      await store.trash('kept')
      let emptyings = 0
      const { emptyTrash } = Shard.prototype
      Shard.prototype.emptyTrash = function (...args) {
        emptyings++
        return emptyTrash.apply(this, args)
      }
      try {
        const end = Date.now() + scaled(10000)
        while ((await store.metrics()).expiries.files < 8 && Date.now() < end) await new Promise((resolve) => setTimeout(resolve, 20))
        expect((await store.metrics()).expiries.files).to.equal(8)
      } finally {
        Shard.prototype.emptyTrash = emptyTrash
      }
      expect(emptyings).to.equal(0)
      expect((await store.usage()).trash.files).to.equal(1)
    })

    it('by itself once trash is trashDays old, from the collector timer, which keeps no process alive', async () => {
      const store = t.open({ chunkSize: C, trashDays: 300 / DAY }) // 300 ms
      await withFiles(store, 3)
      await store.trash('f0')
      await store.trash('f1')
      await until(async () => (await store.metrics()).trash.emptied === 2, 5000, 'the trash emptied')
      expect((await store.usage()).trash).to.deep.equal({ files: 0, bytes: 0 })
      expect(await store.restoreTrash()).to.deep.equal({ files: 0, bytes: 0 })
      expect(await store.exists('f0')).to.equal(false)
      expect(await store.exists('f2')).to.equal(true)
    })

    it('a closed shard\'s old trash, from the usage cache at the next open', async () => {
      const store = t.open({ chunkSize: C, openAhead: false })
      await withFiles(store, 2)
      await store.trash('f0')
      await store.close()
      const again = t.open({ chunkSize: C, openAhead: false, trashDays: 1 / DAY })
      await again.open()
      await until(async () => (await again.metrics()).trash.emptied === 1, 5000, 'the trash emptied')
      expect(await again.restoreTrash()).to.deep.equal({ files: 0, bytes: 0 })
    })
  })

  describe('figures', () => {
    it('usage() gives trash in total and per shard; metrics and Prometheus their gauges', async () => {
      const store = t.open({ chunkSize: C })
      const files = await withFiles(store, 3)
      await store.trash('f1')
      const usage = await store.usage()
      expect(usage.trash).to.deep.equal({ files: 1, bytes: files.f1.length })
      expect(usage.files).to.equal(3) // trashed files still take their space
      const shard = (await store.stat('f0')).shard
      expect(usage.shards.reduce((sum, s) => sum + s.trash.files, 0)).to.equal(1)
      expect(usage.shards.find((s) => s.index === shard).trash).to.be.an('object')
      const metrics = await store.metrics()
      expect(metrics.trash).to.include({ files: 1, bytes: files.f1.length })
      const text = metricsText(metrics)
      expect(text).to.contain('kfs_trash_files 1\n')
      expect(text).to.contain(`kfs_trash_bytes ${files.f1.length}\n`)
      expect(metrics.operations.trash.count).to.equal(1)
    })
  })

  describe('records', () => {
    it('the head carries flag bit 2 and the time in bytes 48-55; the index one record per trashed file; verify names a lost record and repair makes it again', async () => {
      const store = t.open({ chunkSize: C })
      await withFiles(store, 1)
      const shard = (await store.stat('f0')).shard
      const key = require('../lib/api/keys').coerceKey('f0').key
      const before = Date.now()
      await store.trash('f0')
      await store.close()
      const [{ value: raw }] = await shardRecords(storeDir(), shard, { gte: key, lte: key }, true)
      expect(raw[5] & 2).to.equal(2)
      const time = raw.readUInt32BE(48) * 2 ** 32 + raw.readUInt32BE(52)
      expect(time).to.be.within(before, Date.now())
      const index = await shardRecords(storeDir(), shard, records.trashRange(0))
      expect(index).to.deep.equal([{ key: records.trashKey(time, key), value: '700' }])
      const db = await LevelDb.open(path.join(storeDir(), shardDirName(shard)))
      await db.batch([{ type: 'del', key: index[0].key }])
      await db.close()
      const again = t.open({ chunkSize: C })
      const [problem] = (await again.verify()).problems
      expect(problem).to.include({ kind: 'trash', key })
      await again.repair(shard)
      expect((await again.verify()).problems).to.deep.equal([])
      expect(await again.restoreTrash()).to.deep.equal({ files: 1, bytes: 700 })
      expect(await again.exists('f0')).to.equal(true)
    })

    it('verify reads a trashed file and names its damage', async () => {
      const store = t.open({ chunkSize: C })
      await withFiles(store, 2, { large: true })
      const shard = (await store.stat('f1')).shard
      await store.trash('f1')
      await store.close()
      const key = require('../lib/api/keys').coerceKey('f1').key
      const db = await LevelDb.open(path.join(storeDir(), shardDirName(shard)))
      const chunks = []
      for await (const entry of db.scan({ gt: `${key} `, lt: `${key} ~`, values: false })) chunks.push(entry.key)
      await db.batch([{ type: 'del', key: chunks[1] }])
      await db.close()
      const problems = (await t.open({ chunkSize: C }).verify()).problems
      expect(problems.map((p) => p.key)).to.deep.equal([key])
    })
  })

  describe('read-only', () => {
    it('trash, restoreTrash and emptyTrash are EROFS; its readers still hide trashed files', async () => {
      const store = t.open({ chunkSize: C })
      await withFiles(store, 2)
      await store.trash('f0')
      await store.close()
      const ro = t.open({ readOnly: true })
      await rejects(ro.trash('f1'), 'EROFS')
      await rejects(ro.restoreTrash(), 'EROFS')
      await rejects(ro.emptyTrash(), 'EROFS')
      expect(await ro.exists('f0')).to.equal(false)
      expect(await ro.exists('f1')).to.equal(true)
    })
  })

  describe('through a holder', () => {
    it('trash, restoreTrash and emptyTrash cross the socket', async () => {
      const held = await holder(storeDir(), { chunkSize: C })
      try {
        const remote = t.open({}, 'store')
        await remote.writeFile('a', 'one')
        await remote.writeFile('b', 'two!')
        await remote.trash('a')
        expect(remote.heldBy).to.equal(held.child.pid)
        expect(await remote.exists('a')).to.equal(false)
        await rejects(remote.trash('a'), 'ENOENT')
        expect((await remote.usage()).trash).to.deep.equal({ files: 1, bytes: 3 })
        expect(await remote.restoreTrash()).to.deep.equal({ files: 1, bytes: 3 })
        expect(String(await remote.readFile('a'))).to.equal('one')
        await remote.trash('b')
        await rejects(remote.emptyTrash({ before: 'x' }), 'EINVAL')
        expect(await remote.emptyTrash({ before: new Date(0) })).to.deep.equal({ files: 0, bytes: 0 })
        expect(await remote.emptyTrash({ before: new Date(Date.now() + 1000) })).to.deep.equal({ files: 1, bytes: 4 })
        expect(await remote.restoreTrash()).to.deep.equal({ files: 0, bytes: 0 })
        expect(await remote.exists('b')).to.equal(false)
        await remote.close()
      } finally {
        await held.stop()
      }
    })

    it('a holder of an older kfs refuses them: EINVAL, and nothing is done', async () => {
      // The holder's protocol without the new methods: what an older kfs serves.
      const script = `
        const { CALLS } = require('./lib/share/protocol')
        for (const m of ['trash', 'restoreTrash', 'emptyTrash']) CALLS.delete(m)
        const store = require('./')(process.argv[1], {})
        store.open().then(() => console.log('holding'))
        process.stdin.resume()
        process.stdin.on('end', () => store.close().then(() => process.exit(0)))`
      const child = spawn(process.execPath, ['-e', script, storeDir()], { cwd: ROOT, stdio: ['pipe', 'pipe', 'inherit'] })
      const exited = new Promise((resolve) => child.once('exit', resolve))
      await new Promise((resolve, reject) => { child.stdout.once('data', resolve); child.once('exit', reject) })
      try {
        const remote = t.open({}, 'store')
        await remote.writeFile('a', 'one')
        for (const call of [() => remote.trash('a'), () => remote.restoreTrash(), () => remote.emptyTrash()]) {
          const err = await rejects(call(), 'EINVAL')
          expect(err.message).to.match(/is not one this protocol serves/)
        }
        expect(await remote.exists('a')).to.equal(true)
        await remote.close()
      } finally {
        child.stdin.end()
        await exited
      }
    })
  })

  describe('crash states', () => {
    // What a power cut keeps of LevelDB is every write synced before it (doc/reliability.md):
    // the writes emptyTrash and restoreTrash rest on must be synced before they resolve.
    function recordingWrites () {
      const seen = []
      const { batch, put } = LevelDb.prototype
      LevelDb.prototype.batch = function (ops, options = {}) {
        seen.push({ ops: ops.map((op) => op.key), sync: Boolean(options.sync) })
        return batch.call(this, ops, options)
      }
      LevelDb.prototype.put = function (key, value, options = {}) {
        seen.push({ ops: [key], sync: Boolean(options.sync) })
        return put.call(this, key, value, options)
      }
      return { seen, stop: () => Object.assign(LevelDb.prototype, { batch, put }) }
    }

    it('every batch of an emptying, and the restore time, are synced before they resolve', async () => {
      const store = t.open({ chunkSize: C, shardCount: 2 })
      await withFiles(store, 6)
      for (const key of ['f0', 'f1', 'f2']) await store.trash(key)
      const writes = recordingWrites()
      try {
        await store.emptyTrash()
        const emptying = writes.seen.filter((w) => w.ops.some((k) => k.startsWith(records.TRASH_INDEX)))
        expect(emptying.length).to.be.at.least(1)
        expect(emptying.every((w) => w.sync)).to.equal(true)
        writes.seen.length = 0
        await store.trash('f3')
        await store.restoreTrash()
        const restore = writes.seen.filter((w) => w.ops.includes('clock!restoredAt'))
        expect(restore).to.deep.equal([{ ops: ['clock!restoredAt'], sync: true }])
      } finally {
        writes.stop()
      }
    })

    // The store's files copied at each step of an emptying and of a restore (each copy a
    // state a crash can leave, every write before it made), then opened.
    it('a crash at any step never brings back an emptied file, nor loses a restored one', async () => {
      const options = { chunkSize: C, shardCount: 2, reclaim: false }
      const store = t.open(options)
      const files = await withFiles(store, 8)
      for (const key of ['f0', 'f1', 'f2', 'f3']) await store.trash(key)
      const states = []
      const copy = (name) => {
        const to = path.join(t.dir, `state-${states.length}`)
        fs.cpSync(storeDir(), to, { recursive: true, filter: (src) => !/(LOCK|kfs\.sock)$/.test(src) })
        states.push({ name, dir: to })
      }
      const { emptyTrash } = Shard.prototype
      Shard.prototype.emptyTrash = async function (...args) {
        const done = await emptyTrash.apply(this, args)
        copy(`after a batch of shard ${this.index}`)
        return done
      }
      try {
        copy('before the emptying')
        await store.emptyTrash({ before: Date.now() + 1 })
      } finally {
        Shard.prototype.emptyTrash = emptyTrash
      }
      const emptied = states.length
      await store.trash('f4')
      await store.trash('f5')
      copy('before the restore')
      await store.restoreTrash()
      copy('after the restore')
      await store.close()
      for (const [n, { name, dir }] of states.entries()) {
        fs.rmSync(path.join(dir, 'kfs.sock'), { force: true })
        const again = require('..')(dir, { ...options, share: false })
        try {
          for (const key of ['f0', 'f1', 'f2', 'f3']) expect(await again.exists(key), `${name}: ${key}`).to.equal(false)
          const restored = n === states.length - 1
          for (const key of ['f4', 'f5']) expect(await again.exists(key), `${name}: ${key}`).to.equal(restored || n < emptied)
          for (const key of ['f6', 'f7']) expect((await again.readFile(key)).equals(files[key]), `${name}: ${key}`).to.equal(true)
          expect((await again.verify()).problems, name).to.deep.equal([])
        } finally {
          await again.close()
        }
      }
    })
  })
})

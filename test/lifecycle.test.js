'use strict'

const { expect } = require('chai')
const fs = require('node:fs')
const path = require('node:path')
const { spawn } = require('node:child_process')
const { Readable } = require('node:stream')
const { pipeline } = require('node:stream/promises')
const kfs = require('..')
const { useTmp, rejects, bytes, collect, keysForShards, assertNoStrayChunks, REF, scaled, sleep } = require('./helpers')

const ROOT = path.join(__dirname, '..')

// Runs a script in a child process with the store location as argv[2].
function runChild (script, dir, { timeout = scaled(30000) } = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['-e', script, dir], { cwd: ROOT })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (d) => (stdout += d))
    child.stderr.on('data', (d) => (stderr += d))
    const timer = setTimeout(() => {
      child.kill('SIGKILL')
      reject(new Error(`child did not exit within ${timeout} ms; stderr: ${stderr}`))
    }, timeout)
    child.on('exit', (code, signal) => {
      clearTimeout(timer)
      resolve({ code, signal, stdout, stderr })
    })
  })
}

// Every public operation, as a function of a store holding the file 'present'.
const OPERATIONS = {
  open: (s) => s.open(),
  writeFile: (s) => s.writeFile('k', 'v'),
  readFile: (s) => s.readFile('present'),
  put: (s) => s.put('v'),
  putStream: (s) => s.put(Readable.from(['v'])),
  exists: (s) => s.exists('present'),
  stat: (s) => s.stat('present'),
  unlink: (s) => s.unlink('present'),
  list: (s) => collect(s.list()),
  usage: (s) => s.usage(),
  reclaim: (s) => s.reclaim(),
  compact: (s) => s.compact(),
  verify: (s) => s.verify(),
  repair: async (s) => s.repair(await presentShard(s)),
  createReadStream: (s) => collect(s.createReadStream('present')),
  createWriteStream: (s) => pipeline(Readable.from(['v']), s.createWriteStream('k'))
}

const shards = new WeakMap() // store -> shard of 'present', learnt while it was open
const presentShard = (s) => shards.get(s) ?? 0

// A store holding 'present', brought into the given state.
async function storeIn (t, state) {
  const store = t.open()
  await store.writeFile('present', 'x')
  shards.set(store, (await store.stat('present')).shard)
  if (state === 'closing') store.close() // not awaited: the operation runs while it closes
  if (state === 'closed') await store.close()
  return store
}

describe('lifecycle', () => {
  const t = useTmp()

  describe('every public method against an open, a closing and a closed store', () => {
    for (const [name, op] of Object.entries(OPERATIONS)) {
      it(`${name} works on an open store`, async () => {
        await op(await storeIn(t, 'open'))
      })

      for (const state of ['closing', 'closed']) {
        it(`${name} rejects with ECLOSED on a ${state} store`, async () => {
          const store = await storeIn(t, state)
          const err = await rejects(op(store), 'ECLOSED')
          expect(err.message).to.equal('the store is closed')
          await store.close()
        })
      }
    }
  })

  describe('the promise contract', () => {
    // Bad arguments to every method that returns a promise: a rejection, never a throw.
    const BAD = {
      writeFile: (s) => s.writeFile(5, 'v'),
      'writeFile data': (s) => s.writeFile('k', 5),
      readFile: (s) => s.readFile(''),
      put: (s) => s.put(null),
      'put object-mode numbers': (s) => s.put(Readable.from([1, 2])),
      exists: (s) => s.exists({}),
      stat: (s) => s.stat('x'.repeat(5000)),
      unlink: (s) => s.unlink(undefined),
      'verify(null)': (s) => s.verify(null),
      "verify('x')": (s) => s.verify('x'),
      'verify({ shard: 300 })': (s) => s.verify({ shard: 300 }),
      'verify({ shard: 1.5 })': (s) => s.verify({ shard: 1.5 }),
      'verify({ onProgress: 5 })': (s) => s.verify({ onProgress: 5 }),
      'verify({ bogus: 1 })': (s) => s.verify({ bogus: 1 }),
      'repair()': (s) => s.repair(),
      'repair(300)': (s) => s.repair(300),
      'repair(-1)': (s) => s.repair(-1),
      "repair('1')": (s) => s.repair('1'),
      'repair(1.5)': (s) => s.repair(1.5),
      'repair(null)': (s) => s.repair(null)
    }
    for (const [name, call] of Object.entries(BAD)) {
      for (const opened of [false, true]) {
        it(`${name} rejects with EINVAL on a store ${opened ? 'open' : 'not yet open'}, never throwing`, async () => {
          const store = t.open({ shardCount: 4 })
          if (opened) await store.open()
          let promise
          expect(() => { promise = call(store) }).to.not.throw()
          expect(promise).to.be.an.instanceOf(Promise)
          await rejects(promise, 'EINVAL')
        })
      }
    }

    it('checks a shard number against the store, not against the options, before it is open', async () => {
      const first = t.open({ shardCount: 4 })
      await first.open()
      await first.close()
      const made = fs.readdirSync(first.location).filter((e) => e.endsWith('.s')) // ahead, until the close
      const again = t.open() // options say nothing: the store has 4 shards
      await rejects(again.repair(4), 'EINVAL')
      await rejects(again.verify({ shard: 4 }), 'EINVAL')
      expect(fs.readdirSync(again.location).filter((e) => e.endsWith('.s'))).to.deep.equal(made)
    })
  })

  describe('close()', () => {
    it('called from a write stream\'s finish handler or a read stream\'s end handler leaves those streams alone', async () => {
      const errors = []
      const store = t.open()
      const ws = store.createWriteStream('k')
      ws.on('error', (err) => errors.push(err)) // recorded, so a failure shows here, not as a crash
      const closed = new Promise((resolve) => ws.on('finish', () => resolve(store.close())))
      ws.end('data')
      await closed
      const other = t.open()
      expect((await other.readFile('k')).toString()).to.equal('data')
      const rs = other.createReadStream('k')
      rs.on('error', (err) => errors.push(err))
      const rsClosed = new Promise((resolve) => rs.on('close', resolve))
      rs.resume()
      await new Promise((resolve) => rs.on('end', () => resolve(other.close())))
      await rsClosed
      expect(errors).to.deep.equal([])
    })

    it('closes the digest thread and the state even when a shard fails to close', async () => {
      const { Shard } = require('../lib/shard/shard')
      const store = t.open({ referenceId: REF })
      for (const { key } of keysForShards(REF, 2)) await store.writeFile(key, 'x')
      await store.readFile(keysForShards(REF, 1)[0].key)
      const realClose = Shard.prototype.close
      let failures = 0
      Shard.prototype.close = async function () {
        const figures = await realClose.call(this) // what the store caches for the shard
        if (failures++ === 0) throw Object.assign(new Error('injected close failure'), { code: 'EIO' })
        return figures
      }
      try {
        await rejects(store.close(), 'EIO')
      } finally {
        Shard.prototype.close = realClose
      }
      expect(failures).to.be.above(1) // the other shards (those made ahead too) were closed too
      const again = t.open()
      expect((await again.usage()).files).to.equal(2) // not EBUSY: the state was closed
    })
  })

  describe('closed store', () => {
    it('close() ends a put() whose input never ends, leaving nothing behind', async () => {
      const store = t.open()
      await store.open()
      const source = new (require('node:stream').PassThrough)()
      source.write('some bytes, and then nothing more') // a socket that went quiet
      const put = rejects(store.put(source), 'ECLOSED') // handled from the start: it rejects during close()
      await sleep(20)
      await store.close()
      await put
      expect(fs.readdirSync(path.join(store.location, 'tmp'))).to.deep.equal([])
    })

    it('close() ends a put() whose input never ends, called before the store opened', async () => {
      const store = t.open()
      const source = new (require('node:stream').PassThrough)()
      source.write('some bytes, and then nothing more')
      const put = rejects(store.put(source), 'ECLOSED')
      const closed = store.close() // while the store is still opening
      let timer
      const late = new Promise((resolve) => { timer = setTimeout(resolve, scaled(15000), 'still closing') })
      expect(await Promise.race([closed.then(() => 'closed'), late])).to.equal('closed')
      clearTimeout(timer)
      await put
      source.destroy()
    })

    it('close() stops verify() at its next shard, even while the reclaimer takes time to stop', async () => {
      const { Reclaimer } = require('../lib/maintenance/reclaimer')
      const store = t.open({ referenceId: REF })
      for (const { key } of keysForShards(REF, 12)) await store.writeFile(key, 'x')
      // As if a compaction piece were running when close() came.
      const stop = Reclaimer.prototype.stop
      Reclaimer.prototype.stop = function () {
        return new Promise((resolve) => setTimeout(resolve, 500)).then(() => stop.call(this))
      }
      try {
        let closing
        let checkedAfter = 0
        const verified = store.verify({
          onProgress: () => {
            if (closing) checkedAfter++
            else closing = store.close()
          }
        })
        await rejects(verified, 'ECLOSED')
        await closing
        expect(checkedAfter).to.equal(0) // one file per shard: the next shard was refused
      } finally {
        Reclaimer.prototype.stop = stop
      }
    })

    it('close() ends a write waiting for the write budget with ECLOSED', async () => {
      const { WriteBudget } = require('../lib/data/write-budget')
      const store = t.open()
      await store.open()
      // No memory to be had: the write waits in the budget for bytes nobody will give.
      const real = WriteBudget.prototype.tryTake
      WriteBudget.prototype.tryTake = () => false
      try {
        const write = store.writeFile('waits', bytes(256 * 1024)).then(() => 'written', (err) => err.code)
        await sleep(20)
        const closed = store.close()
        let timer
        const outcome = await Promise.race([write, new Promise((resolve) => { timer = setTimeout(() => resolve('still waiting'), scaled(15000)) })])
        clearTimeout(timer)
        expect(outcome).to.equal('ECLOSED')
        await closed
      } finally {
        WriteBudget.prototype.tryTake = real
      }
      expect(await t.open().exists('waits')).to.equal(false)
    })

    it('destroying a write stream ends its wait for the write budget, leaving nothing', async () => {
      const { WriteBudget } = require('../lib/data/write-budget')
      const store = t.open()
      await store.open()
      const real = WriteBudget.prototype.tryTake
      WriteBudget.prototype.tryTake = () => false
      try {
        const ws = store.createWriteStream('destroyed')
        ws.on('error', () => {})
        ws.write(bytes(256 * 1024))
        await sleep(20)
        const closed = new Promise((resolve) => ws.once('close', () => resolve('closed')))
        ws.destroy()
        let timer
        expect(await Promise.race([closed, new Promise((resolve) => { timer = setTimeout(() => resolve('still waiting'), scaled(15000)) })])).to.equal('closed')
        clearTimeout(timer)
      } finally {
        WriteBudget.prototype.tryTake = real
      }
      expect(await store.exists('destroyed')).to.equal(false)
    })

    it('close() is idempotent and works on a store never opened', async () => {
      const store = t.open()
      await store.close()
      await store.close()
      await rejects(store.open(), 'ECLOSED')
      expect(fs.existsSync(store.location)).to.equal(false)
    })

    it('close() waits for operations in flight, which complete', async () => {
      const store = t.open({ chunkSize: 1024 })
      const writes = Array.from({ length: 10 }, (_, i) => store.writeFile(`f${i}`, bytes(20 * 1024)))
      await new Promise(setImmediate)
      await store.close()
      await Promise.all(writes)
      const again = t.open()
      expect((await again.usage()).files).to.equal(10)
    })

    it('close() aborts an unfinished write stream and ends an abandoned listing', async () => {
      const store = t.open({ chunkSize: 1024, referenceId: REF })
      for (const { key } of keysForShards(REF, 3)) await store.writeFile(key, 'x')
      const listing = store.list()[Symbol.asyncIterator]()
      await listing.next() // holds a shard open, then is abandoned
      const ws = store.createWriteStream('never')
      ws.write(bytes(10 * 1024))
      const errored = new Promise((resolve) => ws.once('error', resolve))
      await store.close()
      expect((await errored).code).to.equal('ECLOSED')
      await rejects(listing.next(), 'ECLOSED')
      const again = t.open()
      expect(await again.exists('never')).to.equal(false)
      expect((await again.usage()).files).to.equal(3)
      await again.close()
      await assertNoStrayChunks(t.dir)
    })
  })

  // With share: false; with sharing, test/share.test.js.
  describe('one store, one process', () => {
    it('a second store instance on the same directory gets EBUSY', async () => {
      const first = t.open({ share: false })
      await first.writeFile('a', 'b')
      const err = await rejects(t.open().open(), 'EBUSY')
      expect(err.message).to.contain(first.location).and.to.contain(`in use by another store instance of this process (${process.pid})`)
      expect(err.pid).to.equal(process.pid)
      const unshared = await rejects(t.open({ share: false }).open(), 'EBUSY')
      expect(unshared.message).to.contain('this store was opened with share: false: open it with share: true')
      expect((await first.readFile('a')).toString()).to.equal('b')
    })

    // LevelDB's lock is fcntl's, per process: a second open that reached LevelDB would
    // close a descriptor of the LOCK file and drop the first open's lock.
    it('a second open in this process keeps the first one\'s lock: another process still gets EBUSY', async () => {
      const first = t.open({ share: false })
      await first.writeFile('a', 'b')
      await rejects(t.open({ share: false }).open(), 'EBUSY')
      const script = `require('./')(process.argv[1], { share: false }).open().then((s) => console.log('opened'), (e) => console.log(e.code))`
      const { stdout } = await runChild(script, first.location)
      expect(stdout.trim()).to.equal('EBUSY')
      expect((await rejects(t.open({ share: false }).open(), 'EBUSY')).pid).to.equal(process.pid)
    })

    it('a store that got EBUSY can open once the other instance closed', async () => {
      const first = t.open({ share: false })
      await first.writeFile('a', 'b')
      const second = t.open()
      await rejects(second.open(), 'EBUSY')
      await rejects(second.readFile('a'), 'EBUSY')
      await first.close()
      expect((await second.readFile('a')).toString()).to.equal('b')
    })

    it('a second process gets EBUSY naming the store; the first is unaffected', async () => {
      const first = t.open({ share: false })
      await first.writeFile('a', 'b')
      const script = `require('./')(process.argv[1]).open().then(() => console.log('opened'), (e) => console.log(e.code + ' ' + e.message))`
      const { stdout, code } = await runChild(script, first.location)
      expect(code).to.equal(0)
      expect(stdout).to.match(new RegExp(`^EBUSY the store at .* is in use by process ${process.pid}, which does not share it`))
      expect(stdout).to.contain(first.location)
      await first.writeFile('c', 'd')
      expect((await first.readFile('a')).toString()).to.equal('b')
    })
  })

  describe('the store directory', () => {
    it('is created on first use, with a format file', async () => {
      const store = t.open()
      await store.open()
      const format = JSON.parse(fs.readFileSync(path.join(store.location, 'format.json'), 'utf8'))
      expect(format).to.include({ format: 3, chunkSize: 128 * 1024, shardCount: 256, shardCap: 32 * 1024 ** 3 })
      expect(format.referenceId).to.equal(store.referenceId)
    })

    it('never replaces the reference ID of a store created by someone else meanwhile', async () => {
      const dir = path.join(t.dir, 'race')
      fs.mkdirSync(dir)
      // The slow instance lists the empty directory, then waits until the other has
      // created, filled and closed the store, and only then takes the lock.
      const realReaddir = fs.promises.readdir
      let delayed = false
      let fastClosed, slowListed
      const fastDone = new Promise((resolve) => (fastClosed = resolve))
      const listed = new Promise((resolve) => (slowListed = resolve))
      fs.promises.readdir = async function (...args) {
        const result = await realReaddir.apply(this, args)
        if (!delayed && args[0] === dir) {
          delayed = true
          slowListed()
          await fastDone
        }
        return result
      }
      try {
        const slow = kfs(dir)
        const opening = slow.open()
        await listed // only the slow instance is running until now
        const fast = kfs(dir)
        const key = await fast.put('precious')
        const referenceId = fast.referenceId
        await fast.close()
        fastClosed()
        await opening
        expect(slow.referenceId).to.equal(referenceId)
        expect(await slow.exists(key)).to.equal(true)
        await slow.close()
      } finally {
        fs.promises.readdir = realReaddir
      }
    })

    it('reports running out of file descriptors as EMFILE, not as damage or EBUSY', async () => {
      const script = `
        const store = require('./')(process.argv[1], { maxOpenShards: 64 })
        const codes = new Set()
        Promise.all(Array.from({ length: 64 }, (_, i) => store.writeFile('n' + i, 'x').catch((e) => codes.add(e.code))))
          .then(() => console.log([...codes].join(',')))`
      const { stdout } = await new Promise((resolve) => {
        const child = spawn('bash', ['-c', `ulimit -n 80; exec "${process.execPath}" -e "$0" "$1"`, script, path.join(t.dir, 'fds')], { cwd: ROOT })
        let out = ''
        child.stdout.on('data', (d) => (out += d))
        child.on('close', () => resolve({ stdout: out }))
      })
      expect(stdout.trim()).to.equal('EMFILE')
    })

    it('refuses a path that is a file with ENOTDIR, leaving it alone', async () => {
      const file = path.join(t.dir, 'file')
      fs.writeFileSync(file, 'mine')
      expect((await rejects(kfs(file).open(), 'ENOTDIR')).message).to.equal(`the store path ${file} exists and is not a directory`)
      expect(fs.readFileSync(file, 'utf8')).to.equal('mine')
      // A file where a directory above the store is expected: said in kfs's words, not
      // as the stat that met it.
      for (const options of [{}, { create: false }, { readOnly: true }]) {
        const err = await rejects(kfs(path.join(file, 'store'), options).open(), 'ENOTDIR')
        expect(err.message).to.equal(`the store path ${path.join(file, 'store')} cannot be a directory: a part of that path is a file, not a directory`)
      }
      expect(fs.readFileSync(file, 'utf8')).to.equal('mine')
    })

    it('refuses a directory that belongs to another program with EINVAL, touching nothing', async () => {
      const dir = path.join(t.dir, 'other')
      fs.mkdirSync(dir)
      fs.writeFileSync(path.join(dir, 'notes.txt'), 'mine')
      await rejects(kfs(dir).open(), 'EINVAL')
      expect(fs.readdirSync(dir)).to.deep.equal(['notes.txt'])
    })

    it('reports a store whose format file was lost as ECORRUPT, not as a new store', async () => {
      const store = t.open()
      await store.writeFile('a', 'b')
      await store.close()
      fs.rmSync(path.join(store.location, 'format.json'))
      await rejects(t.open().open(), 'ECORRUPT')
      expect(fs.existsSync(path.join(store.location, 'format.json'))).to.equal(false)
    })
  })

  describe('a damaged shard', () => {
    it('is reported as ECORRUPT for its keys while other shards keep serving', async () => {
      const store = t.open({ referenceId: REF })
      const [a, b] = keysForShards(REF, 2)
      await store.writeFile(a.key, 'in a')
      await store.writeFile(b.key, 'in b')
      await store.close()
      const shardDir = path.join(store.location, `${String(a.shard).padStart(3, '0')}.s`)
      for (const f of fs.readdirSync(shardDir).filter((f) => /^(MANIFEST|CURRENT)/.test(f))) fs.rmSync(path.join(shardDir, f))
      const again = t.open()
      const err = await rejects(again.readFile(a.key), 'ECORRUPT')
      expect(err.message).to.contain(`shard ${String(a.shard).padStart(3, '0')} is corrupt`)
      expect(err.shard).to.equal(a.shard)
      await rejects(again.writeFile(a.key, 'new'), 'ECORRUPT')
      expect((await again.readFile(b.key)).toString()).to.equal('in b')
      // list() and compact() go on with the other shards, then report the damaged one.
      const listed = []
      const listErr = await rejects(async () => { for await (const e of again.list()) listed.push(e.key) }, 'ECORRUPT')
      expect(listed).to.deep.equal([b.key])
      expect(listErr.shards).to.deep.equal([a.shard])
      expect(listErr.message).to.contain('the other shards were listed')
      expect((await rejects(again.compact(), 'ECORRUPT')).message).to.contain('the other shards were compacted')
      await again.writeFile(b.key, 'still works')
      expect(fs.readdirSync(shardDir)).to.not.include('CURRENT') // never recreated
    })

    it('a shard directory that vanished is not silently recreated', async () => {
      const store = t.open({ referenceId: REF })
      const [a] = keysForShards(REF, 1)
      await store.writeFile(a.key, 'x')
      await store.close()
      fs.rmSync(path.join(store.location, `${String(a.shard).padStart(3, '0')}.s`), { recursive: true })
      const shardDir = path.join(store.location, `${String(a.shard).padStart(3, '0')}.s`)
      const again = t.open()
      await rejects(again.readFile(a.key), 'ECORRUPT')
      await rejects(again.writeFile(a.key, 'y'), 'ECORRUPT')
      expect(fs.existsSync(shardDir)).to.equal(false)
      fs.mkdirSync(shardDir) // an empty directory in its place is not taken for a new shard
      await rejects(again.writeFile(a.key, 'y'), 'ECORRUPT')
      expect(fs.readdirSync(shardDir)).to.deep.equal([])
    })
  })

  describe('a good guest', () => {
    it('never keeps the process alive and prints nothing, even without close()', async () => {
      const script = `
        const kfs = require('./')
        const store = kfs(process.argv[1], { idleTimeout: 600000 })
        store.writeFile('a', Buffer.alloc(6 * 1024 * 1024, 1))
          .then(() => store.readFile('a')) // large enough to start the digest thread
          .then(() => store.usage())
          .then(() => store.put('x'))`
      const started = Date.now()
      const { code, stdout, stderr } = await runChild(script, path.join(t.dir, 'guest'))
      expect(code).to.equal(0)
      expect(stdout).to.equal('')
      expect(stderr).to.equal('')
      expect(Date.now() - started).to.be.below(scaled(30000)) // the shards' idle timeout is 600 s
    })
  })
})

module.exports = { runChild }

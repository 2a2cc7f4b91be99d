'use strict'

// A full disk must not lock the store (issue "Correct under every fault", item 1).
// Runs on a small ext4 filesystem the test makes and loop-mounts; needs root.
const { expect } = require('chai')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { execFileSync, spawnSync } = require('node:child_process')
const kfs = require('../..')
const { rejects, bytes, sha256, collect, scaled, sleep, unmount, keyInShard } = require('../helpers')

const MiB = 1024 * 1024
const KFS = path.join(__dirname, '..', '..', 'bin', 'kfs.js')

// Makes and mounts an ext4 filesystem of `size` MiB with no blocks reserved for root,
// so it fills for root too. Resolves to its mount point, or a reason it cannot.
function mountSmallFs (size) {
  if (typeof process.getuid !== 'function' || process.getuid() !== 0) return { skip: 'not running as root (mount needs it)' }
  const base = fs.mkdtempSync(path.join(os.tmpdir(), 'kfs-fs-'))
  const image = path.join(base, 'fs.img')
  const mnt = path.join(base, 'mnt')
  fs.mkdirSync(mnt)
  try {
    fs.writeFileSync(image, '')
    fs.truncateSync(image, size * MiB)
    execFileSync('mkfs.ext4', ['-q', '-F', '-m', '0', image], { stdio: 'pipe' })
    execFileSync('mount', ['-o', 'loop', image, mnt], { stdio: 'pipe' })
  } catch (err) {
    fs.rmSync(base, { recursive: true, force: true })
    return { skip: `cannot make a loop-mounted ext4 filesystem here: ${String(err.stderr || err.message).trim()}` }
  }
  return {
    mnt,
    // Unmounts (retried while busy, then lazily: the loop device goes with the last
    // user), and removes the image only once nothing is mounted there.
    cleanup () {
      if (unmount(mnt)) fs.rmSync(base, { recursive: true, force: true })
      else console.log(`      left behind: ${base} (${mnt} could not be unmounted)`)
    }
  }
}

// A filesystem of `size` MiB for a describe's tests (mountSmallFs): its mount point at
// fsys.mnt; the tests are skipped where none can be made.
function useSmallFs (size) {
  const fsys = {}
  before(function () {
    const made = mountSmallFs(size)
    if (made.skip) {
      console.log(`      skipped: ${made.skip}`)
      this.skip()
    }
    Object.assign(fsys, made)
  })
  after(() => fsys.cleanup && fsys.cleanup())
  return fsys
}

function cli (dir, ...args) {
  const r = spawnSync(process.execPath, [KFS, '-d', dir, ...args], { encoding: 'buffer', input: args[0] === 'put' ? Buffer.from('small file') : undefined })
  return { code: r.status, stdout: r.stdout, stderr: r.stderr.toString() }
}

// Writes 1 MiB files until the disk is full; resolves to the files stored and the error.
async function fill (store, stored, prefix) {
  for (let i = 0; ; i++) {
    const data = bytes(MiB, `${prefix}${i}`)
    try {
      await store.writeFile(`${prefix}${i}`, data)
      stored.set(`${prefix}${i}`, sha256(data))
    } catch (err) {
      return err
    }
  }
}

// Takes every block that is left, so that even making a directory fails.
function fillToTheLastBlock (file) {
  const fd = fs.openSync(file, 'w')
  try {
    for (const size of [MiB, 64 * 1024, 1024]) {
      try {
        for (;;) fs.writeSync(fd, Buffer.alloc(size))
      } catch (err) {
        if (err.code !== 'ENOSPC') throw err
      }
    }
  } finally {
    fs.closeSync(fd)
  }
}

describe('a full disk', function () {
  this.timeout(scaled(120000))
  const fsys = useSmallFs(96)

  it('fails the write with ENOSPC, then reads, lists, verifies, unlinks and compacts, and writes again', async () => {
    const dir = path.join(fsys.mnt, 'store')
    const store = kfs(dir, { maxOpenShards: 2, idleTimeout: 0 }) // shards close as soon as they are idle
    const stored = new Map()
    try {
      const err = await fill(store, stored, 'a')
      expect(err.code, err.stack).to.equal('ENOSPC')
      expect(err.disk, err.stack).to.equal(true)
      expect(stored.size).to.be.above(20)
      // Nothing partial: the file that failed is not there, the others are whole.
      expect(await store.exists(`a${stored.size}`)).to.equal(false)
      for (const [key, digest] of stored) expect(sha256(await store.readFile(key)), key).to.equal(digest)
      expect((await collect(store.list())).length).to.equal(stored.size)
      expect((await store.usage()).files).to.equal(stored.size)
      expect((await store.stat('a0')).size).to.equal(MiB)
      expect((await store.verify()).problems).to.deep.equal([])
      // A shard never created: ENOSPC, not ECORRUPT. (A byte into a shard that exists
      // may still fit.)
      const made = new Set((await store.usage()).shards.map((s) => s.index))
      const never = [...Array(256).keys()].find((i) => !made.has(i))
      await rejects(store.writeFile(keyInShard(store.referenceId, never, 'never'), 'x'), 'ENOSPC')
      // Unlink half, compact, and the next write succeeds.
      const keys = [...stored.keys()]
      for (const key of keys.slice(0, keys.length / 2)) {
        await store.unlink(key)
        stored.delete(key)
      }
      await store.compact()
      await store.writeFile('after', 'it fits again')
      expect((await store.readFile('after')).toString()).to.equal('it fits again')
    } finally {
      await store.close()
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })

  it('100 failed 2 MiB overwrites give back all their memory and never spend the reserve; then a write and close() succeed', async () => {
    const { WriteBudget } = require('../../lib/data/write-budget')
    const dir = path.join(fsys.mnt, 'store6')
    const store = kfs(dir)
    // Every byte taken from the write budget must come back, whatever LevelDB says.
    const real = { tryTake: WriteBudget.prototype.tryTake, give: WriteBudget.prototype.give }
    let outstanding = 0
    WriteBudget.prototype.tryTake = function (bytes) {
      const taken = real.tryTake.call(this, bytes)
      if (taken) outstanding += bytes
      return taken
    }
    WriteBudget.prototype.give = function (bytes) {
      outstanding -= bytes
      return real.give.call(this, bytes)
    }
    const within = (promise) => Promise.race([promise, new Promise((resolve) => setTimeout(resolve, scaled(20000), 'hung')).then((r) => r)])
    try {
      await store.writeFile('victim', bytes(2 * MiB, 'v'))
      // Room for the shard to reopen after each failure, not for a 1 MiB batch.
      fs.writeFileSync(path.join(fsys.mnt, 'slack'), Buffer.alloc(600 * 1024))
      fillToTheLastBlock(path.join(fsys.mnt, 'filler'))
      fs.rmSync(path.join(fsys.mnt, 'slack'))
      const data = bytes(2 * MiB, 'overwrite')
      const codes = new Set()
      for (let i = 0; i < 100; i++) codes.add(await within(store.writeFile('victim', data).then(() => 'written', (err) => err.code)))
      expect([...codes]).to.deep.equal(['ENOSPC'])
      expect(outstanding).to.equal(0)
      expect(fs.existsSync(path.join(dir, 'reserve')), 'the reserve is still in place').to.equal(true)
      expect(sha256(await store.readFile('victim'))).to.equal(sha256(bytes(2 * MiB, 'v')))
      fs.rmSync(path.join(fsys.mnt, 'filler'))
      expect(await within(store.writeFile('after', bytes(2 * MiB, 'a')).then(() => 'written'))).to.equal('written')
      expect(await within(store.close().then(() => 'closed'))).to.equal('closed')
    } finally {
      Object.assign(WriteBudget.prototype, real)
      await store.close().catch(() => {})
      fs.rmSync(dir, { recursive: true, force: true })
      fs.rmSync(path.join(fsys.mnt, 'filler'), { force: true })
    }
  })

  it('reclaiming in the background never gives up the reserve, even when the disk fills as a piece starts; unlink, list, verify and compact still can', async () => {
    const { Shard } = require('../../lib/shard/shard')
    const dir = path.join(fsys.mnt, 'store8')
    const store = kfs(dir, { shardCount: 1 })
    // What the reclaimer's work on the shard met.
    const met = []
    const real = { compactPiece: Shard.prototype.compactPiece, forgetDead: Shard.prototype.forgetDead }
    for (const name of Object.keys(real)) {
      Shard.prototype[name] = function (...args) {
        // Past the reclaimer's check for room: room for a few deletions in LevelDB's
        // log, none for a compaction's tables.
        if (name === 'compactPiece' && !fs.existsSync(path.join(fsys.mnt, 'filler'))) {
          fs.writeFileSync(path.join(fsys.mnt, 'slack'), Buffer.alloc(256 * 1024))
          fillToTheLastBlock(path.join(fsys.mnt, 'filler'))
          fs.rmSync(path.join(fsys.mnt, 'slack'))
        }
        const done = real[name].apply(this, args)
        done.then(() => met.push(`${name} ok`), (err) => met.push(`${name} ${err.code}`))
        return done
      }
    }
    try {
      for (let i = 0; i < 6; i++) await store.writeFile(`f${i}`, bytes(2 * MiB, `f${i}`))
      for (let i = 0; i < 3; i++) await store.unlink(`f${i}`)
      // The reclaimer starts 2 s after the last removal; wait until it met the full disk.
      const deadline = Date.now() + scaled(30000)
      while (!met.some((m) => m.endsWith('ENOSPC')) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50))
      expect(met.some((m) => m.endsWith('ENOSPC')), `the reclaimer met the full disk: ${met}`).to.equal(true)
      await sleep(1000) // a retry, if any, has happened
      expect(fs.existsSync(path.join(dir, 'reserve')), `the reserve is still in place (${met})`).to.equal(true)
      // The reserve is there for these.
      await store.unlink('f3')
      expect((await collect(store.list())).map((e) => e.key).sort()).to.deep.equal([4, 5].map((i) => require('../../lib/api/keys').coerceKey(`f${i}`).key).sort())
      expect((await store.verify()).problems).to.deep.equal([])
      await store.compact()
      expect(sha256(await store.readFile('f5'))).to.equal(sha256(bytes(2 * MiB, 'f5')))
    } finally {
      Object.assign(Shard.prototype, real)
      await store.close().catch(() => {})
      fs.rmSync(dir, { recursive: true, force: true })
      fs.rmSync(path.join(fsys.mnt, 'filler'), { force: true })
    }
  })

  it('an unlink or compact() that meets the error a compaction kept from the full disk is tried again on the shard reopened, the reserve given up before', async () => {
    const { Shard } = require('../../lib/shard/shard')
    const dir = path.join(fsys.mnt, 'store9')
    const options = { shardCount: 1, idleTimeout: 60000, reclaim: false } // the shard stays open
    let store = kfs(dir, options)
    const real = Shard.open
    let shard // the one shard, as last opened
    Shard.open = async (args) => (shard = await real.call(Shard, args))
    const filler = path.join(fsys.mnt, 'filler')
    // A compaction of the whole shard on a full disk: LevelDB 1.20 reports nothing, and
    // keeps the error until the database is reopened. Then the disk has room again.
    const compactionMeetsFullDisk = async () => {
      fs.writeFileSync(path.join(fsys.mnt, 'slack'), Buffer.alloc(256 * 1024))
      fillToTheLastBlock(filler)
      fs.rmSync(path.join(fsys.mnt, 'slack'))
      await shard.db.compactRange('!', '\xff')
      fs.rmSync(filler)
    }
    try {
      for (let i = 0; i < 6; i++) await store.writeFile(`f${i}`, bytes(2 * MiB, `f${i}`))
      await store.close()
      // A new store on the full disk gives up the reserve to open the shard.
      fillToTheLastBlock(filler)
      store = kfs(dir, options)
      expect(sha256(await store.readFile('f5'))).to.equal(sha256(bytes(2 * MiB, 'f5')))
      expect(fs.existsSync(path.join(dir, 'reserve')), 'the reserve was given up').to.equal(false)
      fs.rmSync(filler)
      await compactionMeetsFullDisk()
      await store.unlink('f0')
      await compactionMeetsFullDisk()
      await store.compact()
      expect(await store.exists('f0')).to.equal(false)
      expect(sha256(await store.readFile('f1'))).to.equal(sha256(bytes(2 * MiB, 'f1')))
    } finally {
      Shard.open = real
      await store.close().catch(() => {})
      fs.rmSync(dir, { recursive: true, force: true })
      fs.rmSync(filler, { force: true })
    }
  })

  it('reclaiming as the disk fills spends no reserve: then, the disk full again, the store reads, lists, verifies, unlinks and compacts, and a new process opens every shard', async () => {
    const { Shard } = require('../../lib/shard/shard')
    const dir = path.join(fsys.mnt, 'store10')
    const store = kfs(dir, { shardCount: 4 })
    const reserve = path.join(dir, 'reserve')
    const filler = path.join(fsys.mnt, 'filler')
    const real = Shard.prototype.reclaimPlan
    let planned = 0 // the reclaimer began its work
    Shard.prototype.reclaimPlan = function () {
      planned++
      return real.call(this)
    }
    const key = (name) => require('../../lib/api/keys').coerceKey(name).key
    try {
      // The last writes are still in the shards' memtables.
      for (let i = 0; i < 12; i++) await store.writeFile(`f${i}`, bytes(2 * MiB, `f${i}`))
      fs.writeFileSync(path.join(fsys.mnt, 'slack'), Buffer.alloc(256 * 1024))
      fillToTheLastBlock(filler)
      fs.rmSync(path.join(fsys.mnt, 'slack'))
      for (let i = 0; i < 6; i++) await store.unlink(`f${i}`)
      // The reclaimer starts 2 s after the last removal.
      const deadline = Date.now() + scaled(30000)
      while (!planned && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50))
      expect(planned, 'the reclaimer began').to.be.above(0)
      await sleep(2000) // its work, and any retry, is done
      expect(sha256(await store.readFile('f11'))).to.equal(sha256(bytes(2 * MiB, 'f11')))
      expect((await collect(store.list())).length).to.equal(6)
      expect((await store.verify()).problems).to.deep.equal([])
      expect(fs.existsSync(reserve), 'the reserve is still in place').to.equal(true)
      // Whatever room is left is taken again: the reserve is what there is.
      fillToTheLastBlock(filler + '2')
      for (let i = 6; i < 12; i++) expect(sha256(await store.readFile(`f${i}`)), `f${i}`).to.equal(sha256(bytes(2 * MiB, `f${i}`)))
      expect((await collect(store.list())).length).to.equal(6)
      expect((await store.verify()).problems).to.deep.equal([])
      await store.unlink('f6')
      await store.compact()
      await store.close()
      const verified = cli(dir, 'verify')
      expect(verified.code, verified.stderr).to.equal(0)
      expect(cli(dir, 'list').stdout.toString().trim().split('\n').map((line) => line.split('\t')[0]).sort()).to.deep.equal([7, 8, 9, 10, 11].map((i) => key(`f${i}`)).sort())
    } finally {
      Shard.prototype.reclaimPlan = real
      await store.close().catch(() => {})
      fs.rmSync(dir, { recursive: true, force: true })
      fs.rmSync(filler, { force: true })
      fs.rmSync(filler + '2', { force: true })
    }
  })

  it('reopening the state database after a failed write never gives up the reserve', async () => {
    const { openStoreDir } = require('../../lib/dir/store-dir')
    const { parseOptions } = require('../../lib/api/options')
    const dir = path.join(fsys.mnt, 'store7')
    const { given, resolved } = parseOptions({})
    const opened = await openStoreDir(dir, given, resolved)
    await opened.state.close()
    try {
      fillToTheLastBlock(path.join(fsys.mnt, 'filler'))
      // Opening writes a manifest: on a disk full to the last block it fails.
      const reopened = await opened.reopenState().catch((err) => err)
      if (!(reopened instanceof Error)) await reopened.close() // opened by giving up the reserve: the failure asserted below
      expect(reopened.code).to.equal('ENOSPC')
      expect(fs.existsSync(path.join(dir, 'reserve'))).to.equal(true)
      expect(opened.reserve.low).to.equal(false)
    } finally {
      fs.rmSync(path.join(fsys.mnt, 'filler'), { force: true })
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })

  it('creating a shard on a full disk is ENOSPC, not ECORRUPT, even with no reserve', async () => {
    const dir = path.join(fsys.mnt, 'store3')
    const options = { diskReserve: 0, shardCount: 2, openAhead: false } // shard 1 made by a write only
    let store = kfs(dir, options)
    try {
      const stored = new Map()
      let err
      for (let i = 0; ; i++) {
        const key = keyInShard(store.referenceId || (await store.open(), store.referenceId), 0, `f${i}`)
        const data = bytes(MiB, key)
        try {
          await store.writeFile(key, data)
          stored.set(key, data)
        } catch (e) {
          err = e
          break
        }
      }
      expect(err.code).to.equal('ENOSPC')
      expect(fs.existsSync(path.join(dir, '001.s'))).to.equal(false)
      // Closed and opened again, so that no work left from the failed writes frees space once
      // the disk is filled.
      await store.close()
      store = kfs(dir, options)
      await store.open()
      fillToTheLastBlock(path.join(fsys.mnt, 'filler'))
      const other = keyInShard(store.referenceId, 1, 'new shard')
      const created = await rejects(store.writeFile(other, 'x'), 'ENOSPC')
      expect(created.message).to.not.contain('corrupt')
      expect(fs.readdirSync(path.join(dir, 'tmp'))).to.deep.equal([]) // no half-made shard
    } finally {
      await store.close()
      fs.rmSync(dir, { recursive: true, force: true })
      fs.rmSync(path.join(fsys.mnt, 'filler'), { force: true })
    }
  })

  it('a write never spends the reserve: a new shard on a full disk is ENOSPC, and the store still reads, unlinks and compacts', async () => {
    const dir = path.join(fsys.mnt, 'store4')
    const store = kfs(dir, { shardCount: 2, maxOpenShards: 2, idleTimeout: 0 })
    try {
      await store.open()
      const k0 = keyInShard(store.referenceId, 0, 'zero')
      await store.writeFile(k0, bytes(MiB, 'zero'))
      fillToTheLastBlock(path.join(fsys.mnt, 'filler'))
      await rejects(store.writeFile(keyInShard(store.referenceId, 1, 'one'), bytes(8 * MiB)), 'ENOSPC')
      expect(sha256(await store.readFile(k0))).to.equal(sha256(bytes(MiB, 'zero')))
      await store.unlink(k0)
      await store.compact()
    } finally {
      await store.close()
      fs.rmSync(dir, { recursive: true, force: true })
      fs.rmSync(path.join(fsys.mnt, 'filler'), { force: true })
    }
  })

  it('a state database that failed on the full disk is reopened: once space is back, every shard opens', async function () {
    // Hundreds of synced writes to a loop device: 5 s alone, 35 s beside three busy loops,
    // over 120 s once in a full system run at a load of about 12.
    this.timeout(scaled(300000))
    const dir = path.join(fsys.mnt, 'store5')
    const N = 64
    const store = kfs(dir, { shardCount: N, maxOpenShards: 1, idleTimeout: 0, diskReserve: 0 })
    try {
      await store.open()
      const keys = []
      for (let i = 0; i < N; i++) {
        keys.push(keyInShard(store.referenceId, i, `k${i}`))
        await store.writeFile(keys[i], `data${i}`)
      }
      // Enough room for the state's log to grow, not for its flush.
      fs.writeFileSync(path.join(fsys.mnt, 'slack'), Buffer.alloc(80 * 1024))
      fillToTheLastBlock(path.join(fsys.mnt, 'filler'))
      fs.rmSync(path.join(fsys.mnt, 'slack'))
      // Opening shards over and over writes the state until its flush fails.
      for (let round = 0; round < 30; round++) {
        for (const key of keys) await store.readFile(key).catch((err) => expect(err.code).to.equal('ENOSPC'))
      }
      fs.rmSync(path.join(fsys.mnt, 'filler'))
      for (const [i, key] of keys.entries()) expect((await store.readFile(key)).toString()).to.equal(`data${i}`)
      await store.writeFile('after', 'x')
    } finally {
      await store.close()
      fs.rmSync(dir, { recursive: true, force: true })
      fs.rmSync(path.join(fsys.mnt, 'filler'), { force: true })
    }
  })

  it('a new process can open the store on the full disk: get, list, stat, verify, unlink, compact, then put', async function () {
    this.timeout(scaled(300000)) // 17 s alone, 40 s beside three busy loops
    const dir = path.join(fsys.mnt, 'store2')
    const store = kfs(dir, { maxOpenShards: 2, idleTimeout: 0 })
    const stored = new Map()
    const err = await fill(store, stored, 'b')
    await store.close()
    expect(err.code).to.equal('ENOSPC')
    const filler = path.join(fsys.mnt, 'filler')
    try {
      // A shard open, rather than a write, may have met the full disk first and taken the
      // store's reserve: then the disk is made full again.
      if (fs.statfsSync(fsys.mnt).bavail * fs.statfsSync(fsys.mnt).bsize >= MiB) fillToTheLastBlock(filler)
      const { bavail, bsize } = fs.statfsSync(fsys.mnt)
      expect(bavail * bsize).to.be.below(MiB) // full
      const key = (name) => require('../../lib/api/keys').coerceKey(name).key
      const got = cli(dir, 'get', 'b3')
      expect(got.stderr).to.equal('')
      expect(sha256(got.stdout)).to.equal(stored.get('b3'))
      expect(cli(dir, 'list').stdout.toString().trim().split('\n')).to.have.length(stored.size)
      expect(cli(dir, 'stat', 'b4').code).to.equal(0)
      expect(cli(dir, 'verify').code).to.equal(0)
      for (const name of [...stored.keys()].slice(0, stored.size / 2)) {
        const r = cli(dir, 'unlink', name)
        expect(r.code, r.stderr).to.equal(0)
        stored.delete(name)
      }
      expect(cli(dir, 'compact').code).to.equal(0)
      const put = cli(dir, 'put')
      expect(put.code, put.stderr).to.equal(0)
      expect(cli(dir, 'exists', key('b1')).stdout.toString().trim()).to.equal(stored.has('b1') ? 'true' : 'false')
    } finally {
      fs.rmSync(filler, { force: true })
    }
  })
})

describe('kfs stat on a small filesystem', function () {
  this.timeout(scaled(60000))
  const fsys = useSmallFs(64)

  it('free is what the filesystem has available, not the store\'s 8 TiB, and says so', () => {
    const dir = path.join(fsys.mnt, 'store')
    expect(cli(dir, 'put').code).to.equal(0)
    const stat = cli(dir, 'stat')
    expect(stat).to.include({ code: 0, stderr: '' })
    const free = /^free +(\d+) \(available on the filesystem; (\d+) by the store's capacity\)$/m.exec(stat.stdout.toString())
    expect(free, stat.stdout.toString()).to.not.equal(null)
    const { bavail, bsize } = fs.statfsSync(fsys.mnt)
    expect(Number(free[1])).to.be.below(64 * MiB).and.to.be.closeTo(bavail * bsize, MiB) // the command's own open writes a little
    expect(Number(free[2])).to.equal(8 * 1024 ** 4 - 'small file'.length)
  })
})

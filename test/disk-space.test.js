'use strict'

const { expect } = require('chai')
const fs = require('node:fs')
const path = require('node:path')
const { DiskReserve } = require('../lib/dir/disk-reserve')
const { diskUsage } = require('../lib/dir/disk-usage')
const { useTmp } = require('./helpers')

describe('disk reserve', () => {
  const t = useTmp()

  async function reserve (size = 1024 * 1024) {
    fs.mkdirSync(path.join(t.dir, 'tmp'))
    const r = new DiskReserve(t.dir, path.join(t.dir, 'tmp'), size)
    await r.init()
    return r
  }

  it('is made when the store opens, given up on release, and put back once there is room', async () => {
    const r = await reserve()
    expect(fs.statSync(path.join(t.dir, 'reserve')).size).to.equal(1024 * 1024)
    expect(r.low).to.equal(false)
    expect(await r.release()).to.equal(true)
    expect(r.low).to.equal(true)
    expect(fs.existsSync(path.join(t.dir, 'reserve'))).to.equal(false)
    expect(await r.release()).to.equal(false) // nothing left to give up
    expect(await r.roomForWrites()).to.equal(true) // this disk has room: it is back
    expect(fs.statSync(path.join(t.dir, 'reserve')).size).to.equal(1024 * 1024)
    const both = await Promise.all([r.release(), r.release()]) // callers at once share the removal
    expect(both).to.deep.equal([true, true])
    expect(await r.release()).to.equal(false)
  })

  it('close() settles once a reserve being made is in place, and none is made after', async () => {
    const r = await reserve(8 * 1024 * 1024)
    await r.release()
    const making = r.roomForWrites()
    const closed = [r.close(), r.close()]
    expect(r.status).to.equal('closing')
    await Promise.race(closed)
    expect(fs.readdirSync(path.join(t.dir, 'tmp'))).to.deep.equal([]) // nothing half-written left
    expect(fs.statSync(path.join(t.dir, 'reserve')).size).to.equal(8 * 1024 * 1024)
    expect(r.status).to.equal('closed')
    expect(await making).to.equal(true)
    await r.release()
    expect(await r.roomForWrites()).to.equal(false)
    expect(fs.existsSync(path.join(t.dir, 'reserve'))).to.equal(false)
  })

  it('a write waiting for the reserve to be made leaves when its signal aborts; the reserve is still made', async () => {
    const r = await reserve(8 * 1024 * 1024)
    await r.release()
    const controller = new AbortController()
    const waiting = r.roomForWrites(controller.signal)
    const other = r.roomForWrites()
    controller.abort(new Error('destroyed'))
    expect((await waiting.catch((err) => err)).message).to.equal('destroyed')
    expect(await other).to.equal(true)
    expect(fs.statSync(path.join(t.dir, 'reserve')).size).to.equal(8 * 1024 * 1024)
  })

  it('gives no room if an earlier process gave it up', async () => {
    const r = await reserve()
    fs.rmSync(path.join(t.dir, 'reserve'))
    const again = new DiskReserve(t.dir, path.join(t.dir, 'tmp'), 64 * 1024 * 1024 * 1024 * 1024) // never fits
    await again.init()
    expect(again.low).to.equal(true)
    expect(await again.release()).to.equal(false)
    expect(r.low).to.equal(false)
  })

  it('lets every operation that met a full disk at the same time try again once, not only the first', async () => {
    const r = await reserve()
    const full = Object.assign(new Error('full'), { code: 'ENOSPC', syscall: 'write' })
    const tries = [0, 0, 0]
    const results = await Promise.allSettled(tries.map((_, i) => r.withRoom(async () => {
      tries[i]++
      await new Promise((resolve) => setTimeout(resolve, 10 * i)) // they fail one after another
      if (tries[i] === 1) throw full
      return i
    })))
    expect(results.map((x) => x.value)).to.deep.equal([0, 1, 2])
    expect(tries).to.deep.equal([2, 2, 2])
  })

  const full = () => Object.assign(new Error('full'), { code: 'ENOSPC', syscall: 'write' })

  it('does not retry an operation that began after the reserve was given up', async () => {
    const r = await reserve()
    let tries = 0
    await r.withRoom(async () => { if (++tries === 1) throw full() })
    expect(tries).to.equal(2) // the reserve was given up for it
    tries = 0
    const later = await r.withRoom(async () => { tries++; throw full() }).then(() => undefined, (e) => e)
    expect(later.code).to.equal('ENOSPC')
    expect(tries).to.equal(1) // nothing freed for it: the disk is still full
  })

  it('retries once a failure that left a database to reopen, even with the reserve given up before', async () => {
    const r = await reserve()
    await r.release()
    const failures = []
    const mustReopen = (err) => failures.includes(err)
    let tries = 0
    const result = await r.withRoom(async () => {
      if (++tries > 1) return 'done'
      failures.push(full())
      throw failures[0]
    }, mustReopen)
    expect(result).to.equal('done')
    expect(tries).to.equal(2)
    // Every failure leaves a database to reopen: two tries, nested or not.
    for (const nested of [false, true]) {
      tries = 0
      const always = async () => {
        tries++
        failures.push(full())
        throw failures[failures.length - 1]
      }
      const run = nested ? () => r.withRoom(() => r.withRoom(always, mustReopen), mustReopen) : () => r.withRoom(always, mustReopen)
      expect((await run().then(() => undefined, (e) => e)).code).to.equal('ENOSPC')
      expect(tries).to.equal(2)
    }
  })

  it('does not retry a failure that a withRoom inside it already retried', async () => {
    const r = await reserve()
    let tries = 0
    const nested = await r.withRoom(() => r.withRoom(async () => { tries++; throw full() })).then(() => undefined, (e) => e)
    expect(nested.code).to.equal('ENOSPC')
    expect(tries).to.equal(2) // the inner withRoom's two tries, none more
  })

  it('gives up a reserve being made when asked meanwhile, and the operation that met the full disk tries again', async () => {
    const r = await reserve()
    await r.release()
    const making = r.roomForWrites() // this disk has room: it is being made again
    let tries = 0
    const result = await r.withRoom(async () => {
      if (++tries === 1) throw full()
      return 'done'
    })
    expect(result).to.equal('done')
    expect(tries).to.equal(2)
    expect(await making).to.equal(false) // no room for writes: the reserve was given up
    expect(r.low).to.equal(true)
    expect(fs.existsSync(path.join(t.dir, 'reserve'))).to.equal(false)
    expect(fs.readdirSync(path.join(t.dir, 'tmp'))).to.deep.equal([])
    expect(await r.roomForWrites()).to.equal(true) // and put back at the next chance
  })

  it('is put back once when several writes find it missing at the same time', async () => {
    const r = await reserve()
    await r.release()
    const results = await Promise.allSettled([r.roomForWrites(), r.roomForWrites(), r.roomForWrites()])
    expect(results.map((x) => x.status === 'fulfilled' && x.value)).to.deep.equal([true, true, true])
    expect(fs.readdirSync(path.join(t.dir, 'tmp'))).to.deep.equal([])
  })

  it('size 0 turns it off', async () => {
    const r = await reserve(0)
    expect(fs.existsSync(path.join(t.dir, 'reserve'))).to.equal(false)
    expect(r.low).to.equal(false)
    expect(await r.release()).to.equal(false)
    expect(await r.roomForWrites()).to.equal(true)
  })

  it('disk usage counts a directory removed during its walk as empty (a spare removed), and fails for the store itself gone', async () => {
    fs.mkdirSync(path.join(t.dir, 'tmp', 'spare-1'), { recursive: true })
    fs.writeFileSync(path.join(t.dir, 'tmp', 'spare-1', 'CURRENT'), Buffer.alloc(16))
    fs.writeFileSync(path.join(t.dir, 'tmp', 'data'), Buffer.alloc(10))
    const fsp = require('node:fs/promises')
    const readdir = fsp.readdir
    fsp.readdir = function (dir) {
      if (path.basename(dir) === 'spare-1') fs.rmSync(dir, { recursive: true }) // removed as the walk gets there
      return readdir.apply(this, arguments)
    }
    try {
      expect(await diskUsage(t.dir)).to.equal(10)
      expect((await diskUsage(path.join(t.dir, 'missing')).catch((e) => e)).code).to.equal('ENOENT')
    } finally {
      fsp.readdir = readdir
    }
  })

  it('is left out of the disk usage kfs reports', async () => {
    await reserve()
    fs.writeFileSync(path.join(t.dir, 'tmp', 'data'), Buffer.alloc(10))
    expect(await diskUsage(t.dir)).to.equal(10)
  })

  it('store.diskUsage() is the bytes of the store\'s files but the reserve (read-only: exact, nothing written)', async () => {
    const store = t.open()
    await store.writeFile('a'.repeat(40), Buffer.alloc(300 * 1024))
    await store.close()
    const sizes = (dir) => fs.readdirSync(dir, { withFileTypes: true }).reduce((sum, e) => {
      const full = path.join(dir, e.name)
      return sum + (e.isDirectory() ? sizes(full) : fs.statSync(full).size)
    }, 0)
    const reserve = fs.statSync(path.join(store.location, 'reserve')).size
    expect(reserve).to.be.above(0)
    const expected = sizes(store.location) - reserve
    expect(expected).to.be.above(300 * 1024)
    const readOnly = t.open({ readOnly: true })
    expect(await readOnly.diskUsage()).to.equal(expected)
  })
})

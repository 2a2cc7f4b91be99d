'use strict'

// hold: false: a store used only through the process that holds it, never opened here,
// for a watcher beside a node (kfs metrics --listen).
const { expect } = require('chai')
const fs = require('node:fs')
const path = require('node:path')
const kfs = require('..')
const { useTmp, rejects } = require('./helpers')
const { holder } = require('./share-harness')

describe('a store opened with hold: false', function () {
  const t = useTmp()

  async function made () {
    const dir = path.join(t.dir, 'store')
    const store = kfs(dir)
    await store.writeFile('a', 'one')
    await store.close()
    return dir
  }

  it('is ENOTCONN while no process holds the store, takes no lock, and reaches a holder started since', async () => {
    const dir = await made()
    const watcher = kfs(dir, { hold: false })
    try {
      await rejects(watcher.metrics(), 'ENOTCONN', /no process holds the store/)
      await rejects(watcher.readFile('a'), 'ENOTCONN')
      // It holds nothing: a process opening the store now holds it, and serves the watcher.
      const held = kfs(dir)
      await held.open()
      expect(held.heldBy).to.equal(process.pid)
      expect((await watcher.readFile('a')).toString()).to.equal('one')
      await watcher.writeFile('b', 'two')
      expect((await held.readFile('b')).toString()).to.equal('two')
      const metrics = await watcher.metrics()
      expect(metrics.files).to.equal(2)
      expect(metrics.operations.writeFile.count).to.equal(1)
      expect(kfs.metricsText(metrics)).to.match(/^kfs_files 2$/m)
      expect(kfs.METRICS_CONTENT_TYPE).to.equal('text/plain; version=0.0.4')
      await held.close()
      await rejects(watcher.exists('a'), 'ENOTCONN')
    } finally {
      await watcher.close()
    }
  })

  it('follows the holder across a kill -9 and a new holder, never holding the store itself', async () => {
    const dir = await made()
    const watcher = kfs(dir, { hold: false })
    try {
      const first = await holder(dir)
      expect((await watcher.metrics()).files).to.equal(1)
      expect(watcher.heldBy).to.equal(first.child.pid)
      await first.kill()
      await rejects(watcher.metrics(), 'ENOTCONN')
      const second = await holder(dir)
      try {
        expect((await watcher.metrics()).files).to.equal(1)
        expect(watcher.heldBy).to.equal(second.child.pid)
      } finally {
        await second.stop()
      }
    } finally {
      await watcher.close()
    }
  })

  it('is ENOENT where there is no store, and writes nothing there', async () => {
    const missing = path.join(t.dir, 'none')
    await rejects(kfs(missing, { hold: false }).open(), 'ENOENT', /there is no kfs store/)
    expect(fs.existsSync(missing)).to.equal(false)
    const empty = path.join(t.dir, 'empty')
    fs.mkdirSync(empty)
    await rejects(kfs(empty, { hold: false }).stat('a'), 'ENOENT', /there is no kfs store/)
    expect(fs.readdirSync(empty)).to.deep.equal([])
  })

  it('with readOnly, refuses writes itself through a holder', async () => {
    const dir = await made()
    const held = kfs(dir)
    await held.open()
    const watcher = kfs(dir, { hold: false, readOnly: true })
    try {
      expect((await watcher.readFile('a')).toString()).to.equal('one')
      await rejects(watcher.writeFile('b', 'two'), 'EROFS')
    } finally {
      await watcher.close()
      await held.close()
    }
  })

  it('is EINVAL unless a boolean', () => {
    for (const hold of ['no', 0, null]) expect(() => kfs(t.dir, { hold })).to.throw().with.property('code', 'EINVAL')
  })
})

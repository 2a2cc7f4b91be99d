'use strict'

const { execFileSync } = require('node:child_process')
const path = require('node:path')
const { expect } = require('chai')
const { diskUsage } = require('../lib/disk-space')
const { useTmp, keyInShard, bytes, REF } = require('./helpers')

const MiB = 1024 * 1024
const FILES = 6
const SIZE = 4 * MiB

// Polls until the store's directory holds at most `bytes`, or the time is up.
async function usageFallsTo (dir, bytes, ms = 15000) {
  const until = Date.now() + ms
  let used = await diskUsage(dir)
  while (used > bytes && Date.now() < until) {
    await new Promise((resolve) => setTimeout(resolve, 200))
    used = await diskUsage(dir)
  }
  return used
}

describe('space comes back by itself', function () {
  this.timeout(60000)
  const t = useTmp()
  const keys = Array.from({ length: FILES }, (_, i) => keyInShard(REF, 5 + i, `dead ${i}`)) // one file per shard, as a store in use sees

  async function writeAndRemove (store) {
    for (const [i, key] of keys.entries()) {
      await store.writeFile(key, bytes(SIZE, key))
      if (i % 2 === 0) await store.unlink(key)
      else await store.writeFile(key, bytes(SIZE / 4, key)) // overwritten by a smaller version
    }
  }

  it('the space of unlinked and overwritten files is reclaimed in the background, without compact()', async () => {
    const store = t.open({ referenceId: REF })
    await writeAndRemove(store)
    const live = (FILES / 2) * (SIZE / 4)
    expect(await diskUsage(store.location)).to.be.above(FILES * SIZE * 0.9) // nothing was dropped yet
    expect(await usageFallsTo(store.location, live + 2 * MiB)).to.be.at.most(live + 2 * MiB)
    for (const [i, key] of keys.entries()) {
      if (i % 2 === 0) expect(await store.exists(key)).to.equal(false)
      else expect((await store.readFile(key)).equals(bytes(SIZE / 4, key))).to.equal(true)
    }
    expect((await store.verify()).problems).to.deep.equal([])
  })

  it('reclaim: false leaves the space to compact()', async () => {
    const store = t.open({ referenceId: REF, reclaim: false })
    await writeAndRemove(store)
    await new Promise((resolve) => setTimeout(resolve, 3000)) // past the idle delay
    expect(await diskUsage(store.location)).to.be.above(FILES * SIZE * 0.9)
    await store.compact()
    expect(await diskUsage(store.location)).to.be.below(FILES * SIZE * 0.3)
  })

  it('removals noted before a crash are reclaimed once the shard is used again, losing nothing', async () => {
    const dir = path.join(t.dir, 'store')
    execFileSync(process.execPath, ['-e', `
      const store = require(${JSON.stringify(path.resolve(__dirname, '..'))})(process.argv[1], { referenceId: '${REF}' })
      const { bytes } = require(${JSON.stringify(path.join(__dirname, 'helpers'))})
      const keys = ${JSON.stringify(keys)}
      ;(async () => {
        for (const [i, key] of keys.entries()) {
          await store.writeFile(key, bytes(${SIZE}, key))
          if (i % 2 === 0) await store.unlink(key)
        }
        process.exit(0) // killed before the idle delay: nothing was reclaimed
      })()`, dir])
    expect(await diskUsage(dir)).to.be.above(FILES * SIZE * 0.9)
    const store = t.open({ referenceId: REF })
    for (const [i, key] of keys.entries()) expect(await store.exists(key)).to.equal(i % 2 === 1) // opens their shards
    const live = (FILES / 2) * SIZE
    expect(await usageFallsTo(dir, live + 2 * MiB)).to.be.at.most(live + 2 * MiB)
    for (const [i, key] of keys.entries()) {
      if (i % 2 === 1) expect((await store.readFile(key)).equals(bytes(SIZE, key))).to.equal(true)
    }
    expect((await store.verify()).problems).to.deep.equal([])
  })

  it('close() during reclaiming waits for it, and the process exits by itself', async () => {
    const dir = path.join(t.dir, 'store')
    const started = Date.now()
    execFileSync(process.execPath, ['-e', `
      const store = require(${JSON.stringify(path.resolve(__dirname, '..'))})(process.argv[1], { referenceId: '${REF}' })
      const { bytes } = require(${JSON.stringify(path.join(__dirname, 'helpers'))})
      const keys = ${JSON.stringify(keys)}
      ;(async () => {
        for (const key of keys) await store.writeFile(key, bytes(${SIZE}, key))
        for (const key of keys) await store.unlink(key)
        setTimeout(() => store.close(), 2050) // about when the idle reclaim starts
      })()`, dir], { timeout: 20000 })
    expect(Date.now() - started).to.be.below(20000)
    const store = t.open({ referenceId: REF })
    for (const key of keys) expect(await store.exists(key)).to.equal(false)
    expect((await store.verify()).problems).to.deep.equal([])
  })
})

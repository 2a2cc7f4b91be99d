'use strict'

const { expect } = require('chai')
const { useTmp, REF, keyInShard, sha256, scaled } = require('./helpers')

// A shard keeps the fingerprints (first 7 hex digits) of its keys, and a commit whose
// key has no fingerprint there skips reading the old metadata. These tests check that
// replacing and removing stay exact around that shortcut.
describe('small files: commits that skip reading metadata', function () {
  this.timeout(scaled(60000))
  const t = useTmp()
  const key = keyInShard(REF, 9, 'a')
  // Another key of the same shard with the same fingerprint.
  const twin = key.slice(0, 7) + [...key.slice(7)].map((c) => (c === 'f' ? '0' : 'f')).join('')

  async function expectUsage (store, files, used) {
    const usage = await store.usage()
    expect({ files: usage.files, used: usage.used }).to.deep.equal({ files, used })
    expect((await store.verify()).problems).to.deep.equal([])
  }

  it('an overwrite replaces the version written just before, and one written before the shard was opened', async () => {
    let store = t.open({ referenceId: REF })
    await store.writeFile(key, Buffer.alloc(1024, 1))
    await store.writeFile(key, Buffer.alloc(2048, 2))
    await expectUsage(store, 1, 2048)
    await store.close()
    store = t.open({ referenceId: REF })
    await store.writeFile(key, Buffer.alloc(3072, 3))
    await expectUsage(store, 1, 3072)
    expect((await store.readFile(key)).equals(Buffer.alloc(3072, 3))).to.equal(true)
  })

  it('keys sharing a fingerprint: removing one leaves the other known', async () => {
    const store = t.open({ referenceId: REF, shardCount: 1 }) // both keys in the one shard
    await store.writeFile(key, Buffer.alloc(1000, 1))
    await store.writeFile(twin, Buffer.alloc(2000, 2))
    await expectUsage(store, 2, 3000)
    await store.unlink(key)
    await store.writeFile(twin, Buffer.alloc(500, 3))
    await expectUsage(store, 1, 500)
    await store.writeFile(key, Buffer.alloc(10, 4))
    await expectUsage(store, 2, 510)
  })

  it('a shard holding more files than it keeps fingerprints for reads metadata on every commit', async () => {
    let store = t.open({ referenceId: REF, shardCount: 1 })
    const keys = Array.from({ length: 8200 }, (_, i) => sha256(`many ${i}`))
    for (const k of keys) await store.writeFile(k, 'x')
    await store.writeFile(keys[0], 'yy') // past the limit while open
    await expectUsage(store, 8200, 8201)
    await store.close()
    store = t.open({ referenceId: REF, shardCount: 1 })
    await store.writeFile(keys[1], 'zzz') // over the limit when opened
    await expectUsage(store, 8200, 8203)
  })
})

'use strict'

// The shape the store's calls take: one backend interface, which the store opened here
// and a holder's client both implement, each call with a rule for being made again after
// a lost holder; one table of routes, which the client sends and the holder serves.
const { expect } = require('chai')
const fs = require('node:fs')
const path = require('node:path')
const { LocalStore } = require('../lib/store/local')
const { Remote } = require('../lib/share/client')
const { RETRIES } = require('../lib/share/retries')
const { ROUTES, VERSION, routeOf, requestOf } = require('../lib/share/protocol')
const storeDir = require('../lib/dir/store-dir')
const kfs = require('..')
const { useTmp, rejects } = require('./helpers')
const { holder } = require('./share-harness')

// The backend calls lib/store.js makes: #op('name', ...) and run('name', ...).
// The calls lib/store.js makes, and lib/store/streams.js for it.
function storeCalls () {
  const text = ['store.js', 'store/streams.js'].map((file) => fs.readFileSync(path.join(__dirname, '..', 'lib', file), 'utf8')).join('\n')
  return [...new Set([...text.matchAll(/(?:#op|\.op|\.run)\('(\w+)'/g)].map((m) => m[1]))].sort()
}

describe('the store\'s backends', () => {
  it('each call the store makes has a rule for being made again, and both backends take it', () => {
    const calls = storeCalls()
    expect(calls).to.include.members(['readFile', 'writeFile', 'openReader', 'openWriter', 'put', 'putStream', 'list', 'verify'])
    expect(calls.filter((name) => RETRIES[name] === undefined), 'calls without a rule').to.deep.equal([])
    for (const Backend of [LocalStore, Remote]) {
      const missing = Object.keys(RETRIES).filter((name) => typeof Backend.prototype[name] !== 'function')
      expect(missing, `calls ${Backend.name} does not take`).to.deep.equal([])
    }
  })

  it('a request the client sends on each route is the one the holder serves on it', () => {
    for (const name of Object.keys(ROUTES)) {
      const param = ROUTES[name].param === undefined ? undefined : 'a b/c'
      const { method, path: sent } = requestOf(name, param, { sync: '1', shard: undefined })
      const root = Boolean(ROUTES[name].root)
      expect(sent.startsWith(root ? `/${ROUTES[name].path}` : `${VERSION}/`), sent).to.equal(true)
      expect(sent.endsWith('?sync=1'), sent).to.equal(true)
      const pathname = sent.split('?')[0]
      const params = pathname.split('/').slice(root ? 2 : 3)
      expect([routeOf(method, pathname), params.map(decodeURIComponent)], sent).to.deep.equal([name, param === undefined ? [] : [param]])
    }
    expect(routeOf('HEAD', `${VERSION}/files/k`)).to.equal('read')
    expect(routeOf('GET', `${VERSION}/files`)).to.equal(undefined)
    expect(routeOf('PATCH', `${VERSION}/files/k`)).to.equal(undefined)
    // Prometheus's path, outside the version, and only there.
    expect(routeOf('GET', '/metrics')).to.equal('metrics')
    expect(routeOf('HEAD', '/metrics')).to.equal('metrics')
    expect(routeOf('GET', `${VERSION}/metrics`)).to.equal(undefined)
    expect(routeOf('GET', '/metrics/x')).to.equal(undefined)
    expect(routeOf('GET', '/files/k')).to.equal(undefined)
  })

  describe('beside a holder', () => {
    const t = useTmp()
    const openStoreDir = storeDir.openStoreDir
    let opens
    beforeEach(() => {
      opens = 0
      storeDir.openStoreDir = (...args) => { opens++; return openStoreDir(...args) }
    })
    afterEach(() => { storeDir.openStoreDir = openStoreDir })

    it('a store reaches the holder through its socket first, reading none of the store\'s files, and checks its options against the holder\'s', async () => {
      const dir = path.join(t.dir, 'store')
      const made = kfs(dir)
      await made.writeFile('a', 'one')
      await made.close()
      opens = 0
      const held = await holder(dir)
      try {
        const store = kfs(dir)
        expect(String(await store.readFile('a'))).to.equal('one')
        expect(store.heldBy).to.equal(held.child.pid)
        await store.close()
        await rejects(kfs(dir, { chunkSize: 1000 }).open(), 'EINVAL', /chunkSize/)
        expect(opens).to.equal(0)
        // With no socket to try (share: false), the store is opened here: EBUSY.
        await rejects(kfs(dir, { share: false }).open(), 'EBUSY')
        expect(opens).to.equal(1)
      } finally {
        await held.stop()
      }
    })
  })
})

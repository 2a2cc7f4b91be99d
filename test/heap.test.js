'use strict'

const fs = require('node:fs')
const path = require('node:path')
const v8 = require('node:v8')
const vm = require('node:vm')
const { execFileSync } = require('node:child_process')
const { expect } = require('chai')
const { Fingerprints } = require('../lib/shard/fingerprints')
const { LevelDb } = require('../lib/leveldb/leveldb')
const { useTmp, sha256, scaled } = require('./helpers')

// What a store keeps in the JavaScript heap. Past 8 MB of it, V8 runs a full collection
// every 32 MB or so of Buffers that reads hand out, until the heap is large enough for
// its limits to allow more (doc/performance.md, "Format 3: a piece is one get"):
// the library keeps its own share small, and what grows with the files out of it.

// V8's full collections: this test's own, to weigh the heap (the library never asks
// for one).
v8.setFlagsFromString('--expose-gc')
const collect = vm.runInNewContext('gc')

function heapUsed () {
  collect()
  return v8.getHeapStatistics().used_heap_size
}

// The packages `name` depends on, itself included, as installed.
function dependencies (name, seen = new Set()) {
  if (seen.has(name)) return seen
  seen.add(name)
  const manifest = JSON.parse(fs.readFileSync(path.join(__dirname, '..', 'node_modules', name, 'package.json'), 'utf8'))
  for (const dependency of Object.keys(manifest.dependencies || {})) dependencies(dependency, seen)
  return seen
}

describe('the JavaScript heap a store holds', function () {
  this.timeout(scaled(60000))
  const t = useTmp()

  it('8,192 files\' fingerprints take under 16 KiB of it', async () => {
    const keys = Array.from({ length: 8192 }, (_, i) => sha256(`key ${i}`))
    // Two made by commits, key by key; two from the keys a shard holds.
    const make = async (shards) => {
      for (const prints of shards.slice(0, 2)) {
        prints.made()
        keys.forEach((key, i) => prints.added(key, i + 1))
      }
      for (const prints of shards.slice(2)) await prints.mayHold(keys[0], keys.length, async function * () { yield * keys })
      return shards
    }
    await make(Array.from({ length: 4 }, () => new Fingerprints())) // the code that makes them made, and run
    await new Promise((resolve) => setImmediate(resolve)) // and what it made let go
    // The least of three: a store another test left open may allocate meanwhile (it
    // opens and makes its shards in the background).
    let grown = Infinity
    for (let round = 0; round < 3; round++) {
      const before = heapUsed()
      const shards = await make(Array.from({ length: 4 }, () => new Fingerprints()))
      grown = Math.min(grown, (heapUsed() - before) / shards.length)
      expect(shards.every((prints) => !prints.lacks(keys[8191]))).to.equal(true)
    }
    expect(grown).to.be.below(16 * 1024)
  })

  it('an open shard database takes under 1.5 KiB of it', async () => {
    const openAll = async (n) => {
      const dbs = []
      for (let i = 0; i < n; i++) dbs.push(await LevelDb.open(path.join(t.dir, String(i)), { createIfMissing: true }))
      return dbs
    }
    const closeAll = (dbs) => Promise.all(dbs.map((db) => db.close()))
    await closeAll(await openAll(128)) // the code that opens them made, and run
    const dbs = await openAll(128)
    const open = heapUsed()
    await closeAll(dbs.splice(0))
    expect((open - heapUsed()) / 128).to.be.below(1536)
  })

  it('a store written, read and listed loads no package but leveldown and its own; verify() loads async', () => {
    const script = `
      const store = require(${JSON.stringify(path.join(__dirname, '..'))})(${JSON.stringify(path.join(t.dir, 'store'))})
      ;(async () => {
        await store.writeFile('a'.repeat(40), 'x')
        await store.readFile('a'.repeat(40))
        for await (const entry of store.list()) if (!entry) throw new Error('no entry')
        const names = () => [...new Set(Object.keys(require.cache).filter((file) => file.includes('/node_modules/')).map((file) => file.split('/node_modules/').pop().split('/')[0]))]
        const before = names()
        await store.verify()
        await store.close()
        process.stdout.write(JSON.stringify({ before, after: names() }))
      })()`
    const { before, after } = JSON.parse(execFileSync(process.execPath, ['-e', script], { encoding: 'utf8' }))
    expect(before).to.include('leveldown')
    expect(before.filter((name) => !dependencies('leveldown').has(name))).to.deep.equal([])
    expect(after.filter((name) => !before.includes(name))).to.deep.equal(['async'])
  })
})

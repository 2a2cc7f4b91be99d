'use strict'

const { expect } = require('chai')
const fs = require('node:fs')
const path = require('node:path')
const { useTmp, rejects, bytes, keysForShards, collect, REF, scaled } = require('./helpers')

const C = 1024

// A store with files in two shards, compacted so their data sits in table files.
async function twoShardStore (t) {
  const store = t.open({ referenceId: REF, chunkSize: C })
  const [a, b] = keysForShards(REF, 2)
  const files = new Map()
  for (const [i, { key }] of [a, a, b].entries()) {
    const k = i === 1 ? key.slice(0, 40) + 'ff'.repeat(12) : key // a second key routed to shard a
    if (i === 1 && require('../lib/shard/routing').shardFor(Buffer.from(REF, 'hex'), k) !== a.shard) continue
    const data = bytes(40 * C + i, `file${i}`)
    await store.writeFile(k, data)
    files.set(k, data)
  }
  await store.compact()
  await store.close()
  const shardDir = (s) => path.join(store.location, `${String(s).padStart(3, '0')}.s`)
  return { location: store.location, a, b, files, dirA: shardDir(a.shard) }
}

function pipelineInto (ws, data) {
  const { Readable } = require('node:stream')
  const { pipeline } = require('node:stream/promises')
  return pipeline(Readable.from([data.subarray(0, 100), data.subarray(100)]), ws)
}

const tables = (dir) => fs.readdirSync(dir).filter((f) => f.endsWith('.ldb')).map((f) => path.join(dir, f))

describe('verify and repair', function () {
  this.timeout(scaled(60000))
  const t = useTmp()

  it('verify checks every file and reports a sound store as clean', async () => {
    const { files } = await twoShardStore(t)
    const store = t.open()
    const progress = []
    const report = await store.verify({ onProgress: (p) => progress.push(p) })
    expect(report).to.deep.equal({ files: files.size, bytes: [...files.values()].reduce((n, d) => n + d.length, 0), problems: [] })
    expect(progress).to.have.length(files.size)
    await rejects(store.verify({ shard: 256 }), 'EINVAL')
    await rejects(store.verify({ onProgress: 5 }), 'EINVAL')
    await rejects(store.repair(-1), 'EINVAL')
  })

  it('an exception from onProgress is the caller\'s, not damage: verify rejects with it and checks no more', async () => {
    const store = t.open({ referenceId: REF })
    for (const { key } of keysForShards(REF, 20)) {
      for (let i = 0; i < 3; i++) await store.writeFile(key.slice(0, 62) + String(i).padStart(2, '0'), `file ${i}`)
    }
    const mistake = new TypeError('the caller\'s own bug')
    let calls = 0
    const verified = store.verify({
      onProgress: () => {
        calls++
        throw mistake
      }
    })
    let thrown
    await verified.catch((err) => (thrown = err))
    expect(thrown).to.equal(mistake)
    expect(thrown.code).to.equal(undefined)
    expect(calls).to.equal(1)
    expect(await store.verify()).to.deep.include({ files: 60, problems: [] })
  })

  const damages = {
    'flipped bytes in a table file': (dir) => {
      for (const file of tables(dir)) {
        const data = fs.readFileSync(file)
        for (let i = 2000; i < data.length - 2000; i += 4096) data[i] ^= 0xff
        fs.writeFileSync(file, data)
      }
    },
    'a truncated table file': (dir) => {
      for (const file of tables(dir)) fs.truncateSync(file, Math.floor(fs.statSync(file).size / 2))
    },
    'a deleted table file': (dir) => {
      for (const file of tables(dir)) fs.rmSync(file)
    },
    'a missing MANIFEST': (dir) => {
      for (const file of fs.readdirSync(dir).filter((f) => /^(MANIFEST|CURRENT)/.test(f))) fs.rmSync(path.join(dir, file))
    }
  }

  for (const [name, damage] of Object.entries(damages)) {
    it(`${name}: reads fail cleanly, others serve, verify names it, repair recovers the shard`, async () => {
      const { a, b, files, dirA } = await twoShardStore(t)
      expect(tables(dirA).length, 'data in table files').to.be.above(0)
      damage(dirA)
      const store = t.open()
      for (const [key, data] of files) {
        const shard = (key === b.key) ? b.shard : a.shard
        if (shard === b.shard) {
          expect((await store.readFile(key)).equals(data)).to.equal(true)
          continue
        }
        try {
          const back = await store.readFile(key)
          expect(back.equals(data), 'never wrong bytes').to.equal(true)
        } catch (err) {
          expect(err.code, err.stack).to.be.oneOf(['EINTEGRITY', 'ECORRUPT'])
          if (err.code === 'ECORRUPT') expect(err.message).to.match(/shard \d{3} is corrupt: .*kfs repair \d+/)
        }
      }
      const report = await store.verify()
      expect(report.problems.length).to.be.above(0)
      for (const problem of report.problems) expect(problem.shard).to.equal(a.shard)

      const result = await store.repair(a.shard)
      expect(result.shard).to.equal(a.shard)
      const after = await store.verify()
      expect(after.problems).to.deep.equal([])
      // Every file is whole, named as dropped, or counted as lost without a trace.
      let silent = 0
      for (const [key, data] of files) {
        const back = await store.readFile(key).catch((err) => {
          expect(err.code).to.equal('ENOENT')
          return undefined
        })
        if (back) expect(back.equals(data)).to.equal(true)
        else if (!result.dropped.some((d) => d.key === key)) silent++
      }
      expect(silent, JSON.stringify(result)).to.be.at.most(result.unaccounted)
      const usage = await store.usage()
      const listed = await collect(store.list())
      expect(usage.used).to.equal(listed.reduce((n, f) => n + f.size, 0))
      await store.writeFile(a.key, 'usable again')
      expect((await store.readFile(a.key)).toString()).to.equal('usable again')
    })
  }

  it('under load, every key ends as last committed and verify is clean', async () => {
    const store = t.open({ chunkSize: C, maxOpenShards: 8 })
    const keys = Array.from({ length: 40 }, (_, i) => `load-${i}`)
    const last = new Map() // commits in one shard are serialized: the last to resolve won
    let ops = 0
    // A count, not a time window: the load is the same however busy the machine is.
    const worker = async (w) => {
      for (let i = 0; i < 6; i++) {
        const key = keys[(w * 7 + i) % keys.length]
        const data = bytes(((w * 31 + i * 17) % 7) * 700, `${w}-${i}`) // 0 to several chunks
        ops++
        if (i % 4 === 3) {
          const back = await store.readFile(key).catch((err) => (err.code === 'ENOENT' ? undefined : Promise.reject(err)))
          if (back && !last.has(key)) throw new Error('read a file never committed')
        } else if (i % 9 === 8) {
          await pipelineInto(store.createWriteStream(key), data)
          last.set(key, data)
        } else {
          await store.writeFile(key, data)
          last.set(key, data)
        }
      }
    }
    await Promise.all(Array.from({ length: 200 }, (_, w) => worker(w)))
    expect(ops).to.equal(1200)
    for (const [key, data] of last) expect((await store.readFile(key)).equals(data), key).to.equal(true)
    expect((await store.verify()).problems).to.deep.equal([])
    expect((await store.usage()).used).to.equal([...last.values()].reduce((n, d) => n + d.length, 0))
  })

  it('a shard under repair answers EBUSY; one in use cannot be repaired', async () => {
    const { a, b } = await twoShardStore(t)
    const store = t.open({ chunkSize: C })
    const repairing = store.repair(a.shard)
    await rejects(store.readFile(a.key), 'EBUSY')
    expect((await store.readFile(b.key)).length).to.be.above(0)
    await repairing
    const rs = store.createReadStream(a.key)
    await new Promise((resolve) => rs.once('readable', resolve))
    await rejects(store.repair(a.shard), 'EBUSY')
    rs.destroy()
  })
})

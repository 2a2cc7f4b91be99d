'use strict'

const fs = require('node:fs')
const path = require('node:path')
const { execFileSync } = require('node:child_process')
const { expect } = require('chai')
const { useTmp, keysForShards, bytes, collect, openShardLocks, REF, scaled } = require('./helpers')
const { defaultOpenShards } = require('../lib/dir/descriptors')

const C = 4096

describe('every shard usable at once', function () {
  this.timeout(scaled(120000))
  const t = useTmp()

  it('256 slow readers and 256 slow writers across all 256 shards all proceed, with no EBUSY', async () => {
    // A short wait: with a cap below 256, the last streams would fail with EBUSY after
    // it, and none waits with a cap of 256. 5 s, scaled: a loaded machine is slow.
    const store = t.open({ chunkSize: C, referenceId: REF, shardWaitTimeout: scaled(5000) })
    const keys = keysForShards(REF, 256)
    expect(new Set(keys.map((k) => k.shard)).size).to.equal(256)
    for (const { key } of keys) await store.writeFile(key, bytes(8 * C, key))
    // Every reader takes its first chunk and then stalls, holding its shard.
    const readers = keys.map(({ key }) => store.createReadStream(key))
    const firsts = await Promise.all(readers.map((rs) => new Promise((resolve, reject) => {
      rs.once('error', reject)
      rs.once('data', (chunk) => {
        rs.pause()
        resolve(chunk)
      })
    })))
    // Every writer sends half its file and waits, holding its shard.
    const writers = keys.map(({ key }) => store.createWriteStream(`${key}-new`))
    await Promise.all(writers.map((ws) => new Promise((resolve, reject) => {
      ws.once('error', reject)
      ws.write(bytes(4 * C, 'half'), (err) => (err ? reject(err) : resolve()))
    })))
    expect(openShardLocks(store.location)).to.equal(256)
    await Promise.all(writers.map((ws) => new Promise((resolve, reject) => {
      ws.once('error', reject)
      ws.end(bytes(4 * C, 'rest'), resolve)
    })))
    const rests = await Promise.all(readers.map((rs) => collect(rs)))
    keys.forEach(({ key }, i) => expect(Buffer.concat([firsts[i], ...rests[i]]).equals(bytes(8 * C, key))).to.equal(true))
    expect((await store.usage()).files).to.equal(512)
  })

  it('leaves a quarter of the descriptor limit free, at least 64, when choosing how many shards stay open', () => {
    expect(defaultOpenShards(256, 20000)).to.equal(256)
    expect(defaultOpenShards(256, 1024)).to.equal(128)
    expect(defaultOpenShards(256, 128)).to.equal(10)
    expect(defaultOpenShards(16, 1024)).to.equal(16)
    expect(defaultOpenShards(256, 20)).to.equal(1)
    expect(defaultOpenShards(256, undefined)).to.equal(256)
  })

  it('keeps working under ulimit -n 128: fewer shards open, operations queue, never EMFILE or ECORRUPT', function () {
    const script = path.join(t.dir, 'low-limit.js')
    fs.writeFileSync(script, `
      const kfs = require(${JSON.stringify(path.resolve(__dirname, '..'))})
      const { keysForShards, bytes } = require(${JSON.stringify(path.join(__dirname, 'helpers'))})
      ;(async () => {
        const store = kfs(process.argv[2], { chunkSize: ${C}, referenceId: '${REF}' })
        const keys = keysForShards('${REF}', 256)
        // 64 at a time, each holding its shard for a while: more than may be open.
        for (let i = 0; i < keys.length; i += 64) {
          await Promise.all(keys.slice(i, i + 64).map(({ key }) => new Promise((resolve, reject) => {
            const ws = store.createWriteStream(key)
            ws.once('error', reject)
            ws.write(bytes(3 * ${C}, key), () => setTimeout(() => ws.end(resolve), 20))
          })))
        }
        for (const { key } of keys) {
          if (!(await store.readFile(key)).equals(bytes(3 * ${C}, key))) throw new Error('wrong content for ' + key)
        }
        const report = await store.verify()
        if (report.problems.length) throw new Error(JSON.stringify(report.problems))
        let listed = 0
        for await (const entry of store.list()) listed++
        await store.close()
        process.stdout.write(String(listed))
      })().catch((err) => {
        process.stderr.write(err.code + ' ' + err.stack)
        process.exit(1)
      })`)
    let out
    try {
      out = execFileSync('bash', ['-c', 'ulimit -n 128 && exec "$0" "$@"', process.execPath, script, path.join(t.dir, 'store')], { encoding: 'utf8' })
    } catch (err) {
      throw new Error(`the store failed under ulimit -n 128: ${err.stderr}`, { cause: err })
    }
    expect(out).to.equal('256')
  })
})

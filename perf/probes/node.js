'use strict'

// A storage node's workload, measured side by side: kfs (defaults) against one raw
// LevelDB (leveldown, one put per small file, a keys-only iterator for listing), 256
// raw LevelDBs (what sharding alone costs small files), the vanilla engine (kfs with
// shardCount 1) and plain files, each case of each engine in its own child process
// (LevelDB runs all compactions of a process on one thread).
//
// Prints one Markdown table per case, with kfs's ratios to each other engine.

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const crypto = require('node:crypto')
const { inChild: runChild, cliList, now, msSince } = require('../harness/child')
const { cli, runScript, fmt } = require('../harness/script')
const { diskBytes, memory, descriptors } = require('../harness/usage')
const { keysForShards, shardOptions, countKeys, REF } = require('../harness/kfs-work')

const MiB = 1024 * 1024
const SELF = __filename

const COMMAND = cli(__filename, {
  run: 'npm run perf:node --',
  options: [
    { name: '--files', type: 'count', default: 100000, help: 'small files of 1 KiB stored one at a time, then listed' },
    { name: '--big', type: 'number', arg: 'MiB', default: 8, help: 'file size for the many-clients and slow-clients cases, MiB' },
    { name: '--reclaim-files', type: 'count', default: 40, help: 'files of 128 MiB written then unlinked' },
    { name: '--dir', type: 'string', arg: 'DIR', default: process.env.KFS_PERF_DIR || os.tmpdir(), shown: '$KFS_PERF_DIR, else the temp dir', help: 'where the data goes' },
    { name: '--quick', type: 'flag', sets: { files: 300, big: 1, reclaimFiles: 4, reclaimSize: 4, idleMs: 2500, quick: true }, help: 'tiny sizes, for CI: proves the script runs, measures nothing' }
  ],
  defaults: { reclaimSize: 128, idleMs: 5000, quick: false }
})

const percentile = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))]
const key = () => crypto.randomBytes(20).toString('hex')

function openKfs (dir, options = {}) {
  return require('../..')(dir, options)
}

function openRaw (dir, options = {}) {
  const leveldown = require('leveldown')
  const db = leveldown(dir)
  return new Promise((resolve, reject) => db.open({ compression: false, ...options }, (err) => (err ? reject(err) : resolve(db))))
}

const call = (fn) => new Promise((resolve, reject) => fn((err, value) => (err ? reject(err) : resolve(value))))

// The cases, each run in a child process: (engine, options) -> result object.
const CASES = {
  // Stores `files` files of 1 KiB one at a time, awaited, random keys; then lists them.
  // settledMs: the files after the first 2%. kfs creates a shard on its first write
  // (about 14 ms, once in a store's life); with 100,000 files, about every shard exists
  // after the first 2% (2,000 random keys miss a given shard with probability 0.04%).
  async small ({ engine, dir, files }) {
    const value = crypto.randomBytes(1024)
    const settle = Math.floor(files / 50)
    const start = now()
    let settled
    const store = async (put) => {
      const begun = now()
      for (let i = 0; i < files; i++) {
        if (i === settle) settled = now()
        await put(key())
      }
      return { storeMs: msSince(begun), settledMs: msSince(settled), settledFiles: files - settle }
    }
    if (engine === 'raw') {
      const db = await openRaw(dir)
      const timed = await store((k) => call((cb) => db.put(k, value, cb)))
      await call((cb) => db.close(cb))
      return timed
    }
    if (engine === 'raw256') {
      // What sharding alone costs: 256 LevelDBs with kfs's shard settings, one put per
      // file into the one its key picks, so successive puts land in different databases.
      const options = shardOptions()
      fs.mkdirSync(dir, { recursive: true })
      const dbs = []
      for (let i = 0; i < 256; i++) dbs.push(await openRaw(path.join(dir, String(i)), options))
      const timed = await store((k) => call((cb) => dbs[parseInt(k.slice(0, 2), 16)].put(k, value, cb)))
      for (const db of dbs) await call((cb) => db.close(cb))
      return { ...timed, withOpenMs: msSince(start) }
    }
    if (engine === 'fs') {
      for (let i = 0; i < 256; i++) fs.mkdirSync(path.join(dir, i.toString(16).padStart(2, '0')), { recursive: true })
      return store((k) => fs.promises.writeFile(path.join(dir, k.slice(0, 2), k), value))
    }
    const kfsStore = openKfs(dir)
    await kfsStore.open()
    const timed = await store((k) => kfsStore.writeFile(k, value))
    await kfsStore.close()
    return { ...timed, withOpenMs: msSince(start) }
  },

  // Lists what `small` stored, in a fresh process: shards are closed when it starts.
  async list ({ engine, dir }) {
    const start = now()
    let count = 0
    if (engine === 'raw') {
      const db = await openRaw(dir)
      count = await countKeys(db)
      const ms = msSince(start)
      await call((cb) => db.close(cb))
      return { ms, count }
    }
    if (engine === 'fs') {
      for (const sub of fs.readdirSync(dir)) count += fs.readdirSync(path.join(dir, sub)).length
      return { ms: msSince(start), count }
    }
    const store = openKfs(dir)
    for await (const entry of store.list()) if (entry) count++
    const cold = msSince(start)
    const again = now()
    for await (const entry of store.list()) if (entry) count++
    const warm = msSince(again)
    await store.close()
    return { ms: cold, warmMs: warm, count: count / 2 }
  },

  // 256 readers and 256 writers, one of each per shard, all open at once and each
  // stalled for a while after its first chunk; counts failures, descriptors, RSS.
  async slow ({ dir, big }) {
    const store = openKfs(dir, { referenceId: REF })
    const keys = keysForShards(256)
    const block = crypto.randomBytes(MiB)
    const size = big * MiB
    for (const { key: k } of keys) await store.writeFile(k, Buffer.alloc(size, 1))
    const base = memory()
    const peak = { ...base, rss: base.anon + base.file }
    let peakFds = 0
    const tick = setInterval(() => {
      const m = memory()
      peak.anon = Math.max(peak.anon, m.anon)
      peak.file = Math.max(peak.file, m.file)
      peak.rss = Math.max(peak.rss, m.anon + m.file)
      peakFds = Math.max(peakFds, descriptors() || 0)
    }, 20)
    const failures = {}
    const failed = (err) => (failures[err.code] = (failures[err.code] || 0) + 1)
    const start = now()
    const readers = keys.map(({ key: k }) => new Promise((resolve) => {
      const rs = store.createReadStream(k)
      rs.once('data', () => {
        rs.pause()
        setTimeout(() => rs.resume(), 500)
      })
      rs.on('data', () => {})
      rs.on('end', resolve)
      rs.on('error', (err) => resolve(failed(err)))
    }))
    const writers = keys.map(({ key: k }) => new Promise((resolve) => {
      const ws = store.createWriteStream(`${k}-new`)
      ws.on('error', (err) => resolve(failed(err)))
      let sent = 0
      const more = () => {
        while (sent < size) {
          sent += MiB
          if (sent === MiB) return ws.write(block, () => setTimeout(more, 500)) // stalls after its first MiB
          if (!ws.write(block)) return ws.once('drain', more)
        }
        ws.end(resolve)
      }
      more()
    }))
    await Promise.all([...readers, ...writers])
    const ms = msSince(start)
    clearInterval(tick)
    await store.close()
    return { ms, failures, peakFds, rssGrowthMiB: (peak.rss - base.anon - base.file) / MiB, anonGrowthMiB: (peak.anon - base.anon) / MiB, fileGrowthMiB: (peak.file - base.file) / MiB }
  },

  // `clients` concurrent writers share the writing of `files` files of `big` MiB, each
  // writing its share one after the other; then as many readers read them back. The
  // same bytes for any number of clients, so that one client's figure is a sustained
  // rate too, not one file that fits in LevelDB's memtables. In a store in use: every
  // shard exists and is open.
  async clients ({ engine, dir, big, clients, files }) {
    const store = openKfs(dir, engine === 'vanilla' ? { shardCount: 1, referenceId: REF } : { referenceId: REF })
    const data = crypto.randomBytes(big * MiB)
    for (const { key: k } of keysForShards(store.shardCount)) await store.writeFile(k, 'warm-up')
    const all = Array.from({ length: files }, key)
    const shares = Array.from({ length: clients }, (_, c) => all.filter((_, i) => i % clients === c))
    let start = now()
    await Promise.all(shares.map(async (keys) => { for (const k of keys) await store.writeFile(k, data) }))
    const writeMiBs = (files * big) / (msSince(start) / 1000)
    start = now()
    await Promise.all(shares.map(async (keys) => { for (const k of keys) await store.readFile(k) }))
    const readMiBs = (files * big) / (msSince(start) / 1000)
    await store.close()
    return { writeMiBs, readMiBs }
  },

  // Writes then unlinks `files` files one after the other; the directory's size is
  // sampled after each unlink.
  async reclaim ({ engine, dir, files, size, idleMs }) {
    const options = engine === 'vanilla' ? { shardCount: 1 } : engine === 'kfs-no-reclaim' ? { reclaim: false } : {}
    const store = openKfs(dir, options)
    const data = crypto.randomBytes(size * MiB)
    let writeMs = 0
    const unlinks = []
    let maxDisk = 0
    for (let i = 0; i < files; i++) {
      data.writeUInt32LE(i, 0)
      let start = now()
      await store.writeFile(`f${i}`, data)
      writeMs += msSince(start)
      start = now()
      await store.unlink(`f${i}`)
      unlinks.push(msSince(start))
      maxDisk = Math.max(maxDisk, diskBytes(dir))
    }
    const endDisk = diskBytes(dir)
    await new Promise((resolve) => setTimeout(resolve, idleMs))
    const idleDisk = diskBytes(dir)
    await store.close()
    unlinks.sort((a, b) => a - b)
    return { writeMiBs: (files * size) / (writeMs / 1000), unlinkP95: percentile(unlinks, 0.95), maxDisk, endDisk, idleDisk }
  }
}

const inChild = (job) => runChild(SELF, job)

async function main (args) {
  const base = fs.mkdtempSync(path.join(args.dir, 'kfs-node-'))
  const place = (name) => fs.mkdirSync(path.join(base, name), { recursive: true }) || path.join(base, name)
  const print = (line = '') => process.stdout.write(line + '\n')
  try {
    print(`# perf/probes/node.js: ${args.files} small files, ${args.big} MiB big files, ${args.reclaimFiles} x ${args.reclaimSize} MiB reclaimed${args.quick ? ' (--quick: measures nothing)' : ''}`)
    print()
    // 1-3. Small files and listing.
    const small = {}
    const list = {}
    for (const engine of ['kfs', 'raw', 'raw256', 'fs']) {
      const dir = place(`small-${engine}`)
      small[engine] = await inChild({ name: 'small', engine, dir, files: args.files })
      if (engine !== 'raw256') list[engine] = await inChild({ name: 'list', engine, dir })
    }
    const names = { raw: 'one raw LevelDB (put)', raw256: '256 raw LevelDBs, as kfs\'s shards (put)', kfs: 'kfs', fs: 'fs' }
    const rate = (r) => args.files / (r.storeMs / 1000)
    const settledRate = (r) => r.settledFiles / (r.settledMs / 1000)
    print('## Small files: 1 KiB each, one at a time (writeFile awaited)')
    print()
    print('| engine | files/s | files/s counting open | kfs / engine | files/s after the first 2% | kfs / engine |')
    print('|---|---|---|---|---|---|')
    for (const engine of ['kfs', 'raw', 'raw256', 'fs']) {
      const r = small[engine]
      print(`| ${names[engine]} | ${fmt(rate(r))} | ${fmt(r.withOpenMs && args.files / (r.withOpenMs / 1000))} | ${fmt(rate(small.kfs) / rate(r), 2)} | ${fmt(settledRate(r))} | ${fmt(settledRate(small.kfs) / settledRate(r), 2)} |`)
    }
    print()
    print('(kfs creates a shard on its first write, once in a store\'s life: with 100,000 files, about every shard exists after the first 2%.)')
    print()
    const cli = cliList(place('small-kfs'))
    print(`## Listing ${args.files} files`)
    print()
    print('| engine | ms (a fresh process) | warm ms |')
    print('|---|---|---|')
    print(`| kfs list() | ${fmt(list.kfs.ms)} | ${fmt(list.kfs.warmMs)} |`)
    print(`| one raw LevelDB, keys-only iterator | ${fmt(list.raw.ms)} | |`)
    print(`| fs readdir of 256 directories | ${fmt(list.fs.ms)} | |`)
    print(`| \`kfs list > /dev/null\`, the whole process | ${fmt(cli)} | |`)
    print()
    print(`list() / keys-only iterator: ${fmt(list.kfs.ms / list.raw.ms, 2)} (target at most 1.5); kfs list: ${fmt(cli)} ms (target under 1,000 at 100,000 files)`)
    print()
    // 1. Every shard at once.
    const slow = await inChild({ name: 'slow', engine: 'kfs', dir: place('slow'), big: args.big })
    print(`## 256 slow readers and 256 slow writers, one of each per shard, ${args.big} MiB each`)
    print()
    print(`${fmt(slow.ms)} ms; failures: ${JSON.stringify(slow.failures)}; peak descriptors ${fmt(slow.peakFds)} (target under 2,048); RSS growth ${fmt(slow.rssGrowthMiB)} MiB (target under 1,024): private ${fmt(slow.anonGrowthMiB)} MiB, file-backed (LevelDB's mapped tables) ${fmt(slow.fileGrowthMiB)} MiB`)
    print()
    // 5. Many clients.
    const clients = {}
    for (const engine of ['kfs', 'vanilla']) {
      for (const n of [1, 32]) clients[`${engine}${n}`] = await inChild({ name: 'clients', engine, dir: place(`clients-${engine}-${n}`), big: args.big, clients: n, files: 32 })
    }
    print(`## Many clients: 32 files of ${args.big} MiB, shared among the clients`)
    print()
    print('| engine | clients | write MiB/s | read MiB/s |')
    print('|---|---|---|---|')
    for (const [name, r] of Object.entries(clients)) print(`| ${name.replace(/\d+$/, '')} | ${name.match(/\d+$/)[0]} | ${fmt(r.writeMiBs)} | ${fmt(r.readMiBs)} |`)
    print()
    print(`kfs 32 writers / 1: ${fmt(clients.kfs32.writeMiBs / clients.kfs1.writeMiBs, 2)} (target 1.5); kfs / vanilla at 32 writers: ${fmt(clients.kfs32.writeMiBs / clients.vanilla32.writeMiBs, 2)} (target 3); kfs 32 readers / 1: ${fmt(clients.kfs32.readMiBs / clients.kfs1.readMiBs, 2)} (target 1.5)`)
    print()
    // 6. Space comes back.
    const reclaim = {}
    for (const engine of ['kfs', 'kfs-no-reclaim', 'vanilla']) {
      reclaim[engine] = await inChild({ name: 'reclaim', engine, dir: place(`reclaim-${engine}`), files: args.reclaimFiles, size: args.reclaimSize, idleMs: args.idleMs })
    }
    const gb = (b) => fmt(b / 1e9, 2)
    print(`## Write then unlink ${args.reclaimFiles} files of ${args.reclaimSize} MiB`)
    print()
    print(`| engine | write MiB/s | unlink p95 ms | disk at most GB | at the end | ${args.idleMs / 1000} s later |`)
    print('|---|---|---|---|---|---|')
    for (const [engine, r] of Object.entries(reclaim)) print(`| ${engine} | ${fmt(r.writeMiBs)} | ${fmt(r.unlinkP95, 1)} | ${gb(r.maxDisk)} | ${gb(r.endDisk)} | ${gb(r.idleDisk)} |`)
    print()
    print(`kfs disk at the end / vanilla: ${fmt(reclaim.kfs.endDisk / Math.max(1, reclaim.vanilla.endDisk), 2)} (target at most 2); writes with / without reclaiming: ${fmt(reclaim.kfs.writeMiBs / reclaim['kfs-no-reclaim'].writeMiBs, 2)} (target at least 0.9); unlink p95 ${fmt(reclaim.kfs.unlinkP95, 1)} ms (target under 20)`)
  } finally {
    fs.rmSync(base, { recursive: true, force: true })
  }
}

if (require.main === module) runScript(COMMAND, { cases: CASES, main, tee: true })

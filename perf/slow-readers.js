'use strict'

// Memory of 256 slow readers, one per shard, each pausing 500 ms after its first chunk
// (targets: RSS growth under 1 GiB; private memory growth under the store's memory
// budget, kfs's default), measured side by side on the same data:
// kfs read streams, raw leveldown iterators over the same shards' databases (the floor
// LevelDB 1.20 sets), and fs read streams (1 MiB highWaterMark) over the same bytes as
// plain files. Each case runs in a process of its own, rounds alternating. Growth is
// split into private memory (RssAnon) and file-backed pages (RssFile), and the part of
// those that is mapped LevelDB tables (.ldb in /proc/self/smaps).
//

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const crypto = require('node:crypto')
const { inChild } = require('./child')
const { cli, runScript, fmt, MiB } = require('./script')
const { MEMORY } = require('../lib/api/memory')

const PAUSE_MS = 500
const REF = '00112233445566778899aabbccddeeff00112233'

const COMMAND = cli(__filename, {
  options: [
    { name: '--size', type: 'size', default: 8 * MiB, shown: '8M', help: 'each reader\'s file' },
    { name: '--readers', type: 'count', default: 256, help: 'readers; below 256 reads that many shards' },
    { name: '--rounds', type: 'count', default: 3, help: 'rounds' },
    { name: '--dir', type: 'string', arg: 'DIR', default: process.env.KFS_PERF_DIR || os.tmpdir(), shown: '$KFS_PERF_DIR, else the temp dir', help: 'where the data goes' },
    { name: '--quick', type: 'flag', sets: { size: 256 * 1024, readers: 16, rounds: 1, quick: true }, help: '16 readers of 256 KiB, one round: measures nothing' }
  ],
  defaults: { quick: false },
  check (args) {
    args.readers = Math.min(256, args.readers)
  }
})

// MiB of private and file-backed memory, and of mapped LevelDB tables.
function memory () {
  const status = fs.readFileSync('/proc/self/status', 'utf8')
  const field = (name) => Number(status.match(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm'))[1]) / 1024
  let tables = 0
  let inTable = false
  for (const line of fs.readFileSync('/proc/self/smaps', 'utf8').split('\n')) {
    if (/^[0-9a-f]+-[0-9a-f]+ /.test(line)) inTable = line.endsWith('.ldb')
    else if (inTable && line.startsWith('Rss:')) tables += Number(line.split(/\s+/)[1]) / 1024
  }
  return { anon: field('RssAnon'), file: field('RssFile'), tables }
}

// Runs read(onFirst) for every reader while sampling memory every 20 ms: the peak
// growth of each figure over the memory before the readers started.
async function sampled (readers) {
  const base = memory()
  const peak = { ...base }
  const tick = setInterval(() => {
    for (const [name, value] of Object.entries(memory())) peak[name] = Math.max(peak[name], value)
  }, 20)
  const start = process.hrtime.bigint()
  const pause = () => new Promise((resolve) => setTimeout(resolve, PAUSE_MS))
  const bytes = (await Promise.all(readers.map((read) => read(pause)))).reduce((a, b) => a + b, 0)
  const ms = Number(process.hrtime.bigint() - start) / 1e6
  clearInterval(tick)
  return { ms, bytes, anon: peak.anon - base.anon, file: peak.file - base.file, tables: peak.tables - base.tables }
}

// A stream read slowly: paused after its first chunk. Resolves with the bytes read.
const slowly = (stream, pause) => new Promise((resolve, reject) => {
  let bytes = 0
  let first = true
  stream.on('data', (data) => {
    bytes += data.length
    if (!first) return
    first = false
    stream.pause()
    pause().then(() => stream.resume())
  })
  stream.on('end', () => resolve(bytes))
  stream.on('error', reject)
})

const keysOf = (dir) => JSON.parse(fs.readFileSync(path.join(dir, 'keys.json'), 'utf8'))

const cases = {
  // A kfs store with one file of `size` random bytes in each of `readers` shards, and
  // (unless plain is false: perf/costs.js) the same bytes as plain files.
  async make ({ dir, size, readers, plain = true }) {
    const { shardFor } = require('../lib/shard/routing')
    const store = require('..')(path.join(dir, 'store'), { referenceId: REF })
    const keys = new Map()
    for (let i = 0; keys.size < readers; i++) {
      const key = crypto.createHash('sha256').update(`key ${i}`).digest('hex')
      const shard = shardFor(Buffer.from(REF, 'hex'), key)
      if (!keys.has(shard)) keys.set(shard, key)
    }
    if (plain) fs.mkdirSync(path.join(dir, 'files'))
    for (const key of keys.values()) {
      const data = crypto.randomBytes(size)
      await store.writeFile(key, data)
      if (plain) fs.writeFileSync(path.join(dir, 'files', key), data)
    }
    await store.close()
    fs.writeFileSync(path.join(dir, 'keys.json'), JSON.stringify([...keys.values()]))
    return {}
  },
  async kfs ({ dir }) {
    const store = require('..')(path.join(dir, 'store'))
    const keys = keysOf(dir)
    await Promise.all(keys.map((key) => store.exists(key))) // every shard open before the count
    try {
      return await sampled(keys.map((key) => (pause) => slowly(store.createReadStream(key), pause)))
    } finally {
      await store.close()
    }
  },
  // Every record of each shard's database, in key order, as kfs's readers read them.
  async raw ({ dir }) {
    const leveldown = require('leveldown')
    const call = (fn) => new Promise((resolve, reject) => fn((err, ...values) => (err ? reject(err) : resolve(values))))
    const shards = fs.readdirSync(path.join(dir, 'store')).filter((name) => name.endsWith('.s'))
    const dbs = shards.map((name) => leveldown(path.join(dir, 'store', name)))
    await Promise.all(dbs.map((db) => call((cb) => db.open({ createIfMissing: false, maxOpenFiles: 64, cacheSize: 4 * MiB }, cb))))
    try {
      return await sampled(dbs.map((db) => async (pause) => {
        const iterator = db.iterator()
        let bytes = 0
        try {
          for (let first = true; ; first = false) {
            const [key, value] = await call((cb) => iterator.next(cb))
            if (key === undefined) return bytes
            bytes += value.length
            if (first) await pause()
          }
        } finally {
          await call((cb) => iterator.end(cb))
        }
      }))
    } finally {
      await Promise.all(dbs.map((db) => call((cb) => db.close(cb))))
    }
  },
  async fs ({ dir }) {
    const keys = keysOf(dir)
    return sampled(keys.map((key) => (pause) => slowly(fs.createReadStream(path.join(dir, 'files', key), { highWaterMark: MiB }), pause)))
  }
}

async function main (args) {
  fs.mkdirSync(args.dir, { recursive: true })
  const root = fs.mkdtempSync(path.join(args.dir, 'kfs-slow-readers-'))
  const print = (line = '') => process.stdout.write(line + '\n')
  try {
    await inChild(__filename, { name: 'make', dir: root, size: args.size, readers: args.readers })
    print(`# perf/slow-readers.js: ${args.readers} slow readers of ${fmt(args.size / MiB, 2)} MiB each, one per shard, ${args.rounds} round${args.rounds === 1 ? "" : "s"}${args.quick ? ' (--quick: measures nothing)' : ''}`)
    print()
    print('| round | engine | s | RSS growth MiB | private MiB | file-backed MiB | of which mapped tables MiB |')
    print('|---|---|---|---|---|---|---|')
    const growth = { kfs: [], raw: [], fs: [] }
    const privately = { kfs: [], raw: [], fs: [] }
    for (let round = 1; round <= args.rounds; round++) {
      for (const engine of ['kfs', 'raw', 'fs']) {
        const r = await inChild(__filename, { name: engine, dir: root })
        if (r.bytes !== args.readers * args.size && engine !== 'raw') throw new Error(`${engine} read ${r.bytes} bytes, not ${args.readers * args.size}`)
        growth[engine].push(r.anon + r.file)
        privately[engine].push(r.anon)
        print(`| ${round} | ${engine} | ${fmt(r.ms / 1000, 2)} | ${fmt(r.anon + r.file)} | ${fmt(r.anon)} | ${fmt(r.file)} | ${fmt(r.tables)} |`)
      }
    }
    const median = (values) => values.sort((a, b) => a - b)[Math.floor(values.length / 2)]
    const kfs = median(growth.kfs)
    print()
    print(`kfs RSS growth: ${fmt(kfs)} MiB (target under 1,024): ${kfs < 1024 ? 'met' : 'MISSED'}; raw LevelDB iterators, the floor: ${fmt(median(growth.raw))} MiB; fs: ${fmt(median(growth.fs))} MiB (medians)`)
    const own = median(privately.kfs)
    const budget = MEMORY / MiB
    print(`kfs private memory growth: ${fmt(own)} MiB (target under the memory budget, ${fmt(budget)}): ${own < budget ? 'met' : 'MISSED'}; raw LevelDB iterators, the floor: ${fmt(median(privately.raw))} MiB; fs: ${fmt(median(privately.fs))} MiB (medians)`)
  } finally {
    fs.rmSync(root, { recursive: true, force: true })
  }
}

if (require.main === module) runScript(COMMAND, { cases, main, tee: true })

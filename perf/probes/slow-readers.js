'use strict'

// Memory of slow readers and slow writers. Readers: `--readers` of one file each (or of
// a `--range` of it), one file per shard (past 256 readers, several read each file),
// each pausing 500 ms after its first chunk; measured side by side on the same data:
// kfs read streams in the store's process (`kfs`), the same through a process holding
// the store (`holder`: the holder's memory, and its client's as `holder client`), raw
// leveldown iterators over the same shards' databases (`raw`: the floor LevelDB 1.20
// sets) and fs read streams (1 MiB highWaterMark) over the same bytes as plain files
// (`fs`). Writers: `--writers` new files of sizes spread from --write-min to
// --write-max, written in 64 KiB pieces, each pausing 500 ms after its first piece, in
// the store's process (`writers`) and through a holder (`holder writers`, and
// `holder writers client`). Each case runs in a process of its own (the holder too),
// rounds alternating. Growth over the process's memory once its store is open is split
// into private memory (RssAnon) and file-backed pages (RssFile), and the part of those
// that is mapped LevelDB tables (.ldb in /proc/self/smaps), sampled by a worker thread
// of that process: memory every 20 ms, the tables every 500 ms.
//
// Targets: kfs's RSS growth under 1 GiB; its private memory growth, in the store's
// process and in the holder, at most what doc/about.md's formula gives for the readers
// (`memory` + 384 KiB per reader) plus 40 MiB; the writers' at most `memory` plus
// 40 MiB.

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const crypto = require('node:crypto')
const { once } = require('node:events')
const { inChild, Stepped } = require('../harness/child')
const { cli, runScript, fmt, KiB, MiB } = require('../harness/script')
const { MEMORY } = require('../../lib/api/memory')

const PAUSE_MS = 500
const REF = '00112233445566778899aabbccddeeff00112233'
const ENGINES = ['kfs', 'holder', 'raw', 'fs', 'writers', 'holder-writers']
// What the formula allows each reader past the readers' share (doc/about.md, "Memory"),
// and the margin the targets give over the formula.
const PER_READER = 384 * KiB
const MARGIN = 40 * MiB
const PIECE = 64 * KiB

const COMMAND = cli(__filename, {
  options: [
    { name: '--size', type: 'size', default: 8 * MiB, shown: '8M', help: 'each file read' },
    { name: '--readers', type: 'count', default: 256, help: 'readers; below 256 reads that many shards' },
    { name: '--range', type: 'size', help: 'bytes each reader reads, from an offset that differs among the readers of a file (default: the whole file)' },
    { name: '--writers', type: 'count', default: 200, help: 'writers' },
    { name: '--write-min', type: 'size', default: 3 * MiB, shown: '3M', help: 'the smallest file written' },
    { name: '--write-max', type: 'size', default: 20 * MiB, shown: '20M', help: 'the largest file written' },
    { name: '--memory', type: 'size', default: MEMORY, shown: '128M, kfs\'s default', help: 'the store\'s memory budget' },
    { name: '--engines', type: 'list', values: ENGINES, default: ENGINES, help: 'the cases to run' },
    { name: '--rounds', type: 'count', default: 3, help: 'rounds' },
    { name: '--dir', type: 'string', arg: 'DIR', default: process.env.KFS_PERF_DIR || os.tmpdir(), shown: '$KFS_PERF_DIR, else the temp dir', help: 'where the data goes' },
    { name: '--quick', type: 'flag', sets: { size: 256 * KiB, readers: 16, writers: 4, writeMin: 128 * KiB, writeMax: 512 * KiB, rounds: 1, quick: true }, help: '16 readers of 256 KiB and 4 small writers, one round: measures nothing' }
  ],
  defaults: { quick: false },
  check (args) {
    if (args.range !== undefined) args.range = Math.min(args.range, args.size)
    args.writeMax = Math.max(args.writeMin, args.writeMax)
  }
})

// MiB of private and file-backed memory (/proc/self/status), and of mapped LevelDB
// tables (/proc/self/smaps, `tables`).
function memory (tables = false) {
  const status = fs.readFileSync('/proc/self/status', 'utf8')
  const field = (name) => Number(status.match(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm'))[1]) / 1024
  return { anon: field('RssAnon'), file: field('RssFile'), ...(tables ? { tables: mappedTables() } : {}) }
}

// The Rss of the mappings of .ldb files in /proc/self/smaps, read through one small
// buffer and scanned as bytes: smaps as one string (megabytes with the tables of 256
// shards mapped) went to V8's large-object space, which only a full collection frees,
// and grew the very private memory measured by tens of MiB between collections.
const SCRATCH = Buffer.alloc(64 * KiB)
const isHeader = (byte) => (byte >= 0x30 && byte <= 0x39) || (byte >= 0x61 && byte <= 0x66) // a mapping's line starts with its address in hex
function mappedTables () {
  const fd = fs.openSync('/proc/self/smaps', 'r')
  let tables = 0
  let inTable = false
  let kept = 0 // bytes of a line cut by the last read, moved to the start of SCRATCH
  try {
    for (;;) {
      const read = fs.readSync(fd, SCRATCH, kept, SCRATCH.length - kept, null)
      const end = kept + read
      let start = 0
      for (let eol = SCRATCH.indexOf(10, start); eol !== -1 && eol < end; eol = SCRATCH.indexOf(10, start)) {
        if (isHeader(SCRATCH[start])) inTable = SCRATCH.toString('latin1', eol - 4, eol) === '.ldb'
        else if (inTable && SCRATCH.toString('latin1', start, start + 4) === 'Rss:') tables += parseInt(SCRATCH.toString('latin1', start + 4, eol).trim(), 10) / 1024
        start = eol + 1
      }
      if (read === 0) return tables
      kept = end - start
      SCRATCH.copy(SCRATCH, 0, start, end)
    }
  } finally {
    fs.closeSync(fd)
  }
}

// The sampler's thread: peaks of memory() every SAMPLE_MS, and of the mapped tables
// every TABLES_MS, until told to stop; then it posts the peaks.
const SAMPLE_MS = 20
const TABLES_MS = 500
function sampleUntilStopped () {
  const { parentPort } = require('node:worker_threads')
  const peak = memory(true)
  const tick = setInterval(() => {
    for (const [name, value] of Object.entries(memory())) peak[name] = Math.max(peak[name], value)
  }, SAMPLE_MS)
  const tables = setInterval(() => { peak.tables = Math.max(peak.tables, mappedTables()) }, TABLES_MS)
  parentPort.once('message', () => {
    clearInterval(tick)
    clearInterval(tables)
    parentPort.postMessage(peak)
  })
  parentPort.postMessage('started')
}

// Samples memory from now until end(), which resolves to the peak growth of each figure
// over the memory when it started. The samples are taken on a thread of their own: a
// read of /proc/self/smaps takes 60-90 ms with the tables of 256 shards mapped, which
// on the main thread would stall the readers measured.
async function sampling () {
  const { Worker } = require('node:worker_threads')
  const worker = new Worker(__filename, { argv: ['--sampler'] })
  await once(worker, 'message')
  const base = memory(true)
  return async () => {
    worker.postMessage('stop')
    const [peak] = await once(worker, 'message')
    await worker.terminate()
    return { anon: peak.anon - base.anon, file: peak.file - base.file, tables: peak.tables - base.tables }
  }
}

// Runs every job(pause) at once while sampling memory: the peak growth, the time they
// took and the bytes they moved.
async function sampled (jobs) {
  const end = await sampling()
  const start = process.hrtime.bigint()
  const pause = () => new Promise((resolve) => setTimeout(resolve, PAUSE_MS))
  const bytes = (await Promise.all(jobs.map((job) => job(pause)))).reduce((a, b) => a + b, 0)
  const ms = Number(process.hrtime.bigint() - start) / 1e6
  return { ms, bytes, ...(await end()) }
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

// `data` written to a write stream in pieces, slowly: paused after the first piece.
async function writeSlowly (stream, data, pause) {
  const closed = new Promise((resolve, reject) => {
    stream.once('finish', resolve)
    stream.once('error', reject)
  })
  for (let at = 0; at < data.length; at += PIECE) {
    if (!stream.write(data.subarray(at, at + PIECE))) await new Promise((resolve) => stream.once('drain', resolve))
    if (at === 0) await pause()
  }
  stream.end()
  await closed
  return data.length
}

const keysOf = (dir) => JSON.parse(fs.readFileSync(path.join(dir, 'keys.json'), 'utf8'))

// The reads of `readers` readers over the files of `keys`, of `size` bytes: reader i
// reads file i mod the files, whole or `range` bytes of it from an offset that moves by
// 1 MiB (wrapping) for each reader of the same file: { key, range }.
function reads (keys, { readers = keys.length, range, size }) {
  return Array.from({ length: readers }, (_, i) => {
    if (range === undefined) return { key: keys[i % keys.length] }
    const start = (Math.floor(i / keys.length) * MiB) % (size - range + 1)
    return { key: keys[i % keys.length], range: { start, end: start + range - 1 } }
  })
}

// The readers of job on `store`, sampled.
function readAll (store, job) {
  const keys = keysOf(job.dir)
  return sampled(reads(keys, job).map(({ key, range }) => (pause) => slowly(store.createReadStream(key, range), pause)))
}

// The writers of job on `store`, sampled; what they wrote is removed afterwards.
async function writeAll (store, { writers, writeMin, writeMax }) {
  const data = crypto.randomBytes(writeMax)
  const sizes = Array.from({ length: writers }, (_, i) => writeMin + Math.floor((writeMax - writeMin) * i / Math.max(1, writers - 1)))
  const result = await sampled(sizes.map((size, i) => (pause) => writeSlowly(store.createWriteStream(`written ${i}`), data.subarray(0, size), pause)))
  await Promise.all(sizes.map((_, i) => store.unlink(`written ${i}`)))
  return result
}

// The store at `dir`/store, every shard open (so that the growth counts none opening).
async function openStore (dir, memory) {
  const store = require('../..')(path.join(dir, 'store'), { memory })
  await Promise.all(keysOf(dir).map((key) => store.exists(key)))
  return store
}

// run(store, job) on the store opened here, closed afterwards.
async function inStore (job, run) {
  const store = await openStore(job.dir, job.memory)
  try {
    return await run(store, job)
  } finally {
    await store.close()
  }
}

const cases = {
  // A kfs store with one file of `size` random bytes in each of `readers` shards (at
  // most 256), and (unless plain is false: perf/probes/costs.js) the same bytes as plain files.
  async make ({ dir, size, readers, plain = true }) {
    const { shardFor } = require('../../lib/shard/routing')
    const store = require('../..')(path.join(dir, 'store'), { referenceId: REF })
    const keys = new Map()
    for (let i = 0; keys.size < Math.min(256, readers); i++) {
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
  kfs: (job) => inStore(job, readAll),
  writers: (job) => inStore(job, writeAll),
  // The process holding the store (stepped: perf/harness/child.js): its first step starts
  // sampling its memory, the second ends it and returns the growth.
  async holder ({ dir, memory }) {
    const store = await openStore(dir, memory)
    let end
    return {
      step: async () => {
        if (!end) {
          end = await sampling()
          return {}
        }
        const growth = await end()
        end = undefined
        return growth
      },
      close: () => store.close()
    }
  },
  // A client of the holder: the readers, or (`write`) the writers, through it.
  async client (job) {
    const store = require('../..')(path.join(job.dir, 'store'))
    await store.open()
    if (store.heldBy === process.pid) throw new Error('the store is not held by another process')
    try {
      return await (job.write ? writeAll(store, job) : readAll(store, job))
    } finally {
      await store.close()
    }
  },
  // Every record of each shard's database, in key order, as kfs's readers read them:
  // as many bytes as a reader of kfs reads.
  async raw ({ dir, readers, range }) {
    const leveldown = require('leveldown')
    const call = (fn) => new Promise((resolve, reject) => fn((err, ...values) => (err ? reject(err) : resolve(values))))
    const shards = fs.readdirSync(path.join(dir, 'store')).filter((name) => name.endsWith('.s'))
    const dbs = shards.map((name) => leveldown(path.join(dir, 'store', name)))
    await Promise.all(dbs.map((db) => call((cb) => db.open({ createIfMissing: false, maxOpenFiles: 64, cacheSize: 4 * MiB }, cb))))
    const limit = range === undefined ? Infinity : range
    try {
      return await sampled(Array.from({ length: readers || dbs.length }, (_, i) => async (pause) => {
        const iterator = dbs[i % dbs.length].iterator()
        let bytes = 0
        try {
          for (let first = true; bytes < limit; first = false) {
            const [key, value] = await call((cb) => iterator.next(cb))
            if (key === undefined) return bytes
            bytes += value.length
            if (first) await pause()
          }
          return bytes
        } finally {
          await call((cb) => iterator.end(cb))
        }
      }))
    } finally {
      await Promise.all(dbs.map((db) => call((cb) => db.close(cb))))
    }
  },
  async fs (job) {
    const keys = keysOf(job.dir)
    return sampled(reads(keys, job).map(({ key, range }) => (pause) => slowly(fs.createReadStream(path.join(job.dir, 'files', key), { ...range, highWaterMark: MiB }), pause)))
  }
}

// The case through a holder: { holder, client }, each process's result.
async function throughHolder (job) {
  const holder = new Stepped(__filename, { name: 'holder', dir: job.dir, memory: job.memory })
  try {
    await holder.ready()
    await holder.step()
    const client = await inChild(__filename, { ...job, name: 'client' })
    return { holder: { ...(await holder.step()), ms: client.ms, bytes: client.bytes }, client }
  } finally {
    await holder.stop()
  }
}

// Each engine's rows: { case name: result }.
async function run (engine, job) {
  if (engine === 'holder') {
    const { holder, client } = await throughHolder(job)
    return { holder, 'holder client': client }
  }
  if (engine === 'holder-writers') {
    const { holder, client } = await throughHolder({ ...job, write: true })
    return { 'holder writers': holder, 'holder writers client': client }
  }
  return { [engine]: await inChild(__filename, { ...job, name: engine }) }
}

async function main (args) {
  fs.mkdirSync(args.dir, { recursive: true })
  const root = fs.mkdtempSync(path.join(args.dir, 'kfs-slow-readers-'))
  const print = (line = '') => process.stdout.write(line + '\n')
  const job = { dir: root, size: args.size, readers: args.readers, range: args.range, memory: args.memory, writers: args.writers, writeMin: args.writeMin, writeMax: args.writeMax }
  const readBytes = args.readers * (args.range ?? args.size)
  const written = Array.from({ length: args.writers }, (_, i) => args.writeMin + Math.floor((args.writeMax - args.writeMin) * i / Math.max(1, args.writers - 1))).reduce((a, b) => a + b, 0)
  try {
    await inChild(__filename, { name: 'make', dir: root, size: args.size, readers: args.readers })
    const files = Math.min(256, args.readers)
    const what = args.range === undefined ? `${fmt(args.size / MiB, 2)} MiB each` : `${fmt(args.range / MiB, 2)} MiB of files of ${fmt(args.size / MiB, 2)} MiB`
    print(`# perf/probes/slow-readers.js: ${args.readers} slow readers of ${what}, ${files} files, one per shard; ${args.writers} slow writers of ${fmt(args.writeMin / MiB, 2)} to ${fmt(args.writeMax / MiB, 2)} MiB; memory budget ${fmt(args.memory / MiB)} MiB; ${args.rounds} round${args.rounds === 1 ? '' : 's'}${args.quick ? ' (--quick: measures nothing)' : ''}`)
    print()
    print('| round | case | s | RSS growth MiB | private MiB | file-backed MiB | of which mapped tables MiB |')
    print('|---|---|---|---|---|---|---|')
    const growth = {}
    const privately = {}
    for (let round = 1; round <= args.rounds; round++) {
      for (const engine of args.engines) {
        for (const [name, r] of Object.entries(await run(engine, job))) {
          const expected = /writers/.test(name) ? written : readBytes
          if (r.bytes !== expected && name !== 'raw') throw new Error(`${name} moved ${r.bytes} bytes, not ${expected}`)
          ;(growth[name] = growth[name] || []).push(r.anon + r.file)
          ;(privately[name] = privately[name] || []).push(r.anon)
          print(`| ${round} | ${name} | ${fmt(r.ms / 1000, 2)} | ${fmt(r.anon + r.file)} | ${fmt(r.anon)} | ${fmt(r.file)} | ${fmt(r.tables)} |`)
        }
      }
    }
    print()
    const median = (values) => values && [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]
    const met = (ok) => (ok ? 'met' : 'MISSED')
    const others = (values) => ['raw', 'fs'].filter((name) => values[name]).map((name) => `; ${name === 'raw' ? 'raw LevelDB iterators, the floor' : name}: ${fmt(median(values[name]))} MiB`).join('')
    if (growth.kfs) print(`kfs RSS growth: ${fmt(median(growth.kfs))} MiB (target under 1,024): ${met(median(growth.kfs) < 1024)}${others(growth)} (medians)`)
    const readers = (args.memory + args.readers * PER_READER + MARGIN) / MiB
    for (const name of ['kfs', 'holder']) {
      if (!privately[name]) continue
      const own = median(privately[name])
      const client = name === 'holder' ? ` (its client: ${fmt(median(privately['holder client']))} MiB)` : ''
      print(`${name} private memory growth: ${fmt(own)} MiB${client} (target: the memory budget + ${args.readers} x 384 KiB + 40 MiB, ${fmt(readers)}): ${met(own <= readers)}${name === 'kfs' ? others(privately) : ''} (medians)`)
    }
    const writers = (args.memory + MARGIN) / MiB
    for (const name of ['writers', 'holder writers']) {
      if (!privately[name]) continue
      const own = median(privately[name])
      const client = name === 'holder writers' ? ` (its client: ${fmt(median(privately['holder writers client']))} MiB)` : ''
      print(`${name} private memory growth: ${fmt(own)} MiB${client} (target: the memory budget + 40 MiB, ${fmt(writers)}): ${met(own <= writers)} (medians)`)
    }
  } finally {
    fs.rmSync(root, { recursive: true, force: true })
  }
}

if (process.argv[2] === '--sampler') sampleUntilStopped()
else if (require.main === module) runScript(COMMAND, { cases, main, tee: true })

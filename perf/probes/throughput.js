'use strict'

// Throughput of kfs against plain fs on the same disk, at the same durability:
//   sync:  store { sync: true }  vs fs write + fsync (unlink + fsync of the directory)
//   async: store { sync: false } vs fs write without fsync
// Operations are interleaved per repetition so machine drift hits both engines; the
// report gives medians and kfs/fs ratios from this one run, then the targets.
// Besides write, readFile and unlink: a whole-file read stream (fs with a 1 MiB
// highWaterMark), random 1 MiB ranges one at a time (as many as the file has MiB; fs
// reads them from one open handle), and kfs put(buffer) against an fs write. Every kfs
// read checks the chunk digests; readFile and the stream are also timed without the
// check (a perf-only switch), which gives what checking costs.

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const crypto = require('node:crypto')
const { spawn } = require('node:child_process')
const { Readable, Writable } = require('node:stream')
const { pipeline } = require('node:stream/promises')
const kfs = require('../..')
const { UNCHECKED } = require('../../lib/data/chunk-reader')
const { cli, parseCommandLine, teeOutput, drain, fsWrite } = require('../harness/script')

const MiB = 1024 * 1024

const COMMAND = cli(__filename, {
  run: 'npm run perf:throughput --',
  options: [
    { name: '--sizes', type: 'list', of: 'number', default: [8, 32, 128, 512], help: 'file sizes, MiB' },
    { name: '--reps', type: 'count', default: 5, help: 'repetitions' },
    { name: '--dir', type: 'string', arg: 'DIR', default: process.env.KFS_PERF_DIR || os.tmpdir(), shown: '$KFS_PERF_DIR, else the temp dir', help: 'where the data goes' },
    { name: '--no-memory', key: 'memory', type: 'flag', sets: { memory: false }, help: 'skip the memory cases' }
  ],
  defaults: { memory: true }
})
const now = () => process.hrtime.bigint()
const ms = (since) => Number(now() - since) / 1e6

async function time (fn) {
  const start = now()
  await fn()
  return ms(start)
}

async function fsUnlink (file, sync) {
  await fs.promises.unlink(file)
  if (!sync) return
  const dir = await fs.promises.open(path.dirname(file), 'r')
  await dir.sync()
  await dir.close()
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b)
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2
}

async function throughput (args, base) {
  const results = new Map() // `${size} ${mode} ${engine} ${op}` -> [ms]
  const record = (size, mode, engine, op, t) => {
    const k = `${size} ${mode} ${engine} ${op}`
    if (!results.has(k)) results.set(k, [])
    results.get(k).push(t)
  }
  const stores = { sync: kfs(path.join(base, 'kfs-sync'), { sync: true }), async: kfs(path.join(base, 'kfs-async')) }
  const file = path.join(base, 'plain.bin')
  try {
    for (const size of args.sizes) {
      const data = crypto.randomBytes(size * MiB)
      const key = crypto.createHash('sha256').update(data).digest('hex')
      for (let rep = 0; rep < args.reps; rep++) {
        // The same random 1 MiB ranges for both engines in this repetition.
        const ranges = Array.from({ length: size }, () => crypto.randomInt(size) * MiB)
        for (const mode of ['sync', 'async']) {
          const store = stores[mode]
          const engines = {
            fs: async () => {
              record(size, mode, 'fs', 'write', await time(() => fsWrite(file, data, mode === 'sync')))
              record(size, mode, 'fs', 'read', await time(() => fs.promises.readFile(file)))
              record(size, mode, 'fs', 'stream', await time(() => drain(fs.createReadStream(file, { highWaterMark: MiB }))))
              record(size, mode, 'fs', 'ranges', await time(() => fsRanges(file, ranges)))
              record(size, mode, 'fs', 'unlink', await time(() => fsUnlink(file, mode === 'sync')))
            },
            kfs: async () => {
              record(size, mode, 'kfs', 'write', await time(() => store.writeFile(key, data)))
              let back
              record(size, mode, 'kfs', 'read', await time(async () => (back = await store.readFile(key))))
              if (!back.equals(data)) throw new Error('kfs read back different bytes')
              record(size, mode, 'kfs', 'read (unchecked)', await time(() => store.readFile(key, { [UNCHECKED]: true })))
              record(size, mode, 'kfs', 'stream', await time(() => drain(store.createReadStream(key))))
              record(size, mode, 'kfs', 'stream (unchecked)', await time(() => drain(store.createReadStream(key, { [UNCHECKED]: true }))))
              record(size, mode, 'kfs', 'ranges', await time(() => kfsRanges(store, key, ranges)))
              record(size, mode, 'kfs', 'unlink', await time(() => store.unlink(key)))
              let put
              record(size, mode, 'kfs', 'put', await time(async () => (put = await store.put(data))))
              if (put !== key) throw new Error('kfs put returned another key')
              await store.unlink(key) // untimed
            }
          }
          const order = rep % 2 ? ['kfs', 'fs'] : ['fs', 'kfs']
          for (const engine of order) await engines[engine]()
        }
        // Untimed: drop tombstones so the run's disk use stays bounded.
        await Promise.all([stores.sync.compact(), stores.async.compact()])
      }
    }
  } finally {
    await Promise.all([stores.sync.close(), stores.async.close()])
  }
  return results
}

async function fsRanges (file, offsets) {
  const handle = await fs.promises.open(file, 'r')
  const buffer = Buffer.allocUnsafe(MiB)
  try {
    for (const offset of offsets) await handle.read(buffer, 0, MiB, offset)
  } finally {
    await handle.close()
  }
}

async function kfsRanges (store, key, offsets) {
  for (const offset of offsets) await drain(store.createReadStream(key, { start: offset, end: offset + MiB - 1 }))
}

function report (args, results) {
  const lines = []
  const rate = (size, t) => (size / (t / 1000)).toFixed(0)
  lines.push(`kfs throughput, median of ${args.reps}; MiB/s (ms), ratio = kfs / fs at the same durability`)
  lines.push('')
  lines.push('| size | durability | op | fs | kfs | kfs / fs |')
  lines.push('|---|---|---|---|---|---|')
  for (const size of args.sizes) {
    for (const mode of ['sync', 'async']) {
      for (const op of ['write', 'read', 'unlink']) {
        const f = median(results.get(`${size} ${mode} fs ${op}`))
        const k = median(results.get(`${size} ${mode} kfs ${op}`))
        const cell = (t) => (op === 'unlink' ? `${t.toFixed(1)} ms` : `${rate(size, t)} (${t.toFixed(0)} ms)`)
        const ratio = op === 'unlink' ? `${(k / f).toFixed(2)} x time` : `${(f / k).toFixed(2)}`
        lines.push(`| ${size} MiB | ${mode} | ${op} | ${cell(f)} | ${cell(k)} | ${ratio} |`)
      }
      const m = (engine, op) => median(results.get(`${size} ${mode} ${engine} ${op}`))
      const row = (op, f, k, note = '') => lines.push(`| ${size} MiB | ${mode} | ${op} | ${rate(size, f)} (${f.toFixed(0)} ms) | ${rate(size, k)} (${k.toFixed(0)} ms) | ${(f / k).toFixed(2)}${note} |`)
      const cost = (op, checked, unchecked) => lines.push(`| ${size} MiB | ${mode} | ${op}, checked / not | | ${rate(size, checked)} / ${rate(size, unchecked)} | check costs ${((checked / unchecked - 1) * 100).toFixed(0)}% |`)
      cost('readFile', m('kfs', 'read'), m('kfs', 'read (unchecked)'))
      row('read stream (fs: 1 MiB highWaterMark)', m('fs', 'stream'), m('kfs', 'stream'))
      cost('read stream', m('kfs', 'stream'), m('kfs', 'stream (unchecked)'))
      row(`${size} random 1 MiB ranges, one at a time`, m('fs', 'ranges'), m('kfs', 'ranges'), `; kfs ranges / kfs stream ${(m('kfs', 'stream') / m('kfs', 'ranges')).toFixed(2)}`)
      row('put(buffer) (fs: write)', m('fs', 'write'), m('kfs', 'put'))
    }
  }
  return lines
}

function targets (args, results) {
  const m = (k) => median(results.get(k))
  const verdict = (ok) => (ok ? 'met' : 'MISSED')
  const lines = []
  for (const size of args.sizes.filter((s) => s >= 128)) {
    const worst = (fn) => Math.min(fn('sync'), fn('async'))
    const pair = (fn) => `${fn('async').toFixed(2)} / ${fn('sync').toFixed(2)} (async / sync store)`
    const read = (mode) => m(`${size} ${mode} fs read`) / m(`${size} ${mode} kfs read`)
    const stream = (mode) => m(`${size} ${mode} fs stream`) / m(`${size} ${mode} kfs stream`)
    const ranges = (mode) => m(`${size} ${mode} kfs stream`) / m(`${size} ${mode} kfs ranges`)
    const cost = (op) => (mode) => m(`${size} ${mode} kfs ${op}`) / m(`${size} ${mode} kfs ${op} (unchecked)`) - 1
    const costs = ['read', 'stream'].map((op) => Math.max(cost(op)('sync'), cost(op)('async')))
    const write = m(`${size} sync fs write`) / m(`${size} sync kfs write`)
    const unlink = Math.max(m(`${size} sync kfs unlink`), m(`${size} async kfs unlink`))
    lines.push(
      `${size} MiB readFile: ${pair(read)} x fs readFile (target >= 1.0): ${verdict(worst(read) >= 1)}`,
      `${size} MiB read stream: ${pair(stream)} x fs stream with a 1 MiB highWaterMark (target >= 0.8): ${verdict(worst(stream) >= 0.8)}`,
      `${size} MiB random 1 MiB ranges: ${pair(ranges)} x kfs's own stream (target >= 0.8): ${verdict(worst(ranges) >= 0.8)}`,
      `${size} MiB checking chunk digests costs at most ${(costs[0] * 100).toFixed(0)}% (readFile) and ${(costs[1] * 100).toFixed(0)}% (stream) (target <= 10%): ${verdict(Math.max(...costs) <= 0.1)}`,
      `${size} MiB write, sync: ${write.toFixed(2)} x fs write+fsync (target >= 0.5): ${verdict(write >= 0.5)}`,
      `${size} MiB unlink: ${unlink.toFixed(1)} ms (target < 20 ms): ${verdict(unlink < 20)}`
    )
  }
  return lines.length ? lines : ['(targets are defined for files of 128 MiB and more; none in this run)']
}

// Peak RSS growth while streaming a file of `size` MiB into or out of a store, measured
// in a fresh process so nothing else of the run inflates it.
function memoryChild (size, direction, dir) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [__filename, '--memory-child', direction, String(size), dir], { stdio: ['ignore', 'pipe', 'inherit'] })
    let out = ''
    child.stdout.on('data', (d) => (out += d))
    child.on('exit', (code) => (code === 0 ? resolve(JSON.parse(out)) : reject(new Error(`memory child exited with ${code}`))))
  })
}

// Private (anonymous) and file-backed resident memory, from /proc. LevelDB maps the
// table files it reads, so file-backed RSS grows with what is read: clean page cache
// the kernel can drop at any time, unlike the private memory kfs allocates.
function residentMemory () {
  const status = fs.readFileSync('/proc/self/status', 'utf8')
  const field = (name) => Number((status.match(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm')) || [0, 0])[1]) * 1024
  return { anon: field('RssAnon'), file: field('RssFile') }
}

async function runMemoryChild ({ direction, size, dir }) {
  const store = kfs(dir)
  const key = 'memory-test'
  const piece = crypto.randomBytes(MiB)
  const source = () => Readable.from((function * () {
    for (let i = 0; i < size; i++) {
      piece.writeUInt32LE(i, 0) // fresh content per MiB
      yield Buffer.from(piece)
    }
  })())
  if (direction === 'out') await pipeline(source(), store.createWriteStream(key))
  await store.writeFile('warm-up', piece)
  await drain(store.createReadStream('warm-up'))
  const before = residentMemory()
  const peak = { ...before }
  const sampler = setInterval(() => {
    const m = residentMemory()
    peak.anon = Math.max(peak.anon, m.anon)
    peak.file = Math.max(peak.file, m.file)
  }, 2)
  const started = now()
  if (direction === 'in') await pipeline(source(), store.createWriteStream(key))
  else if (direction === 'out') await drain(store.createReadStream(key))
  else await pipeline(source(), new Writable({ write: (chunk, enc, cb) => setImmediate(cb) }))
  const elapsed = ms(started)
  clearInterval(sampler)
  await store.close()
  process.stdout.write(JSON.stringify({ direction, size, anon: peak.anon - before.anon, file: peak.file - before.file, ms: elapsed }))
}

async function main () {
  const argv = process.argv.slice(2)
  if (argv[0] === '--memory-child') return runMemoryChild({ direction: argv[1], size: Number(argv[2]), dir: argv[3] })
  const args = parseCommandLine(COMMAND, argv)
  teeOutput(args, COMMAND)
  fs.mkdirSync(args.dir, { recursive: true })
  const base = fs.mkdtempSync(path.join(args.dir, 'kfs-perf-'))
  const need = Math.max(...args.sizes) * MiB * 6
  const { bavail, bsize } = fs.statfsSync(base)
  if (bavail * bsize < need) throw new Error(`${base} has ${(bavail * bsize / MiB).toFixed(0)} MiB free; this run needs about ${(need / MiB).toFixed(0)} MiB`)
  try {
    console.log(`node ${process.version}, ${os.cpus().length} cpus, data in ${base}`)
    const results = await throughput(args, base)
    console.log(report(args, results).join('\n'))
    console.log('')
    console.log(targets(args, results).join('\n'))
    if (args.memory) {
      const size = Math.max(...args.sizes)
      console.log('')
      // The source allocates a fresh buffer per MiB, garbage until V8 collects it: its
      // own growth, measured alone, is part of any "stream in" figure.
      const source = await memoryChild(size, 'source', path.join(base, 'memory-source'))
      console.log(`the benchmark's source alone (${size} MiB into a null sink): private RSS grew ${(source.anon / MiB).toFixed(1)} MiB`)
      for (const direction of ['in', 'out']) {
        const r = await memoryChild(size, direction, path.join(base, `memory-${direction}`))
        const anon = r.anon / MiB
        const file = r.file / MiB
        console.log(`streaming ${size} MiB ${direction}: peak private RSS grew ${anon.toFixed(1)} MiB (target < 64 MiB): ${anon < 64 ? 'met' : 'MISSED'}; ` +
          `file-backed RSS (LevelDB's mapped tables) grew ${file.toFixed(1)} MiB, total ${(anon + file).toFixed(1)} MiB; ${(size / (r.ms / 1000)).toFixed(0)} MiB/s`)
      }
    }
  } finally {
    fs.rmSync(base, { recursive: true, force: true })
  }
}

main().catch((err) => {
  console.error(err.stack)
  process.exitCode = 1
})

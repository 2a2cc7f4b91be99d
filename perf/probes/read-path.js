'use strict'

// The read path against its floor (the raw binding), side by side in one run: a whole-file
// read stream of one large file, checked (every chunk's CRC32) and unchecked (the
// perf-only switch), and random 1 MiB ranges one at a time and 16 in flight, in a kfs
// process; and in a process of its own, after the store is closed, the bare leveldown
// binding doing the same reads on the shard's LevelDB directory: an iterator over the
// same chunk records (kfs's 1 MiB per trip, and leveldown's default), and the same
// ranges as one get per chunk. Rounds alternate which process goes first; each process
// repeats each case --reps times, alternating checked and unchecked. With --before
// CHECKOUT, the kfs cases also run, in a process of their own, on the kfs at CHECKOUT (a
// copy of the code before a change, say), on the same store. With --malloc, each
// process also runs again with glibc's malloc told to keep freed memory (MALLOC):
// a value of 128 KiB that LevelDB reads is allocated twice (on its thread, then copied
// into a Buffer), and by default glibc hands much of that memory back to the system and
// faults it in anew; the page faults per MiB read are printed for every case.
//
// Prints every figure (median MiB/s and the spread over rounds) and each target beside its ratio.

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const crypto = require('node:crypto')
const { inChild, now, msSince } = require('../harness/child')
const { cli, drain, inFlight, runScript, fmt, MiB } = require('../harness/script')

const KEY = crypto.createHash('sha256').update('read-path').digest('hex')

const COMMAND = cli(__filename, {
  options: [
    { name: '--size', type: 'count', arg: 'MiB', default: 512, help: 'the file, MiB' },
    { name: '--rounds', type: 'count', default: 3, help: 'rounds' },
    { name: '--reps', type: 'count', default: 3, help: 'repetitions of each case per process and round' },
    { name: '--ranges', type: 'count', default: 256, help: 'how many 1 MiB ranges each range case reads' },
    { name: '--dir', type: 'string', arg: 'DIR', default: process.env.KFS_PERF_DIR || os.tmpdir(), shown: '$KFS_PERF_DIR, else the temp dir', help: 'where the data goes' },
    { name: '--before', type: 'path', arg: 'CHECKOUT', help: 'also run the kfs cases on the kfs at CHECKOUT' },
    { name: '--malloc', type: 'flag', help: 'also run each process with glibc\'s malloc told to keep freed memory' }
  ]
})

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b)
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2
}

// glibc's malloc keeping what is freed: no mmap for a value of 128 KiB (the threshold
// stays put once set), and the top of a heap given back only past 64 MiB. Setting the
// trim threshold alone fixes the mmap threshold at 128 KiB: every value is mmapped.
const MALLOC = { MALLOC_MMAP_THRESHOLD_: String(MiB), MALLOC_TRIM_THRESHOLD_: String(64 * MiB) }

// Times fn: { ms, cpu, faults } (cpu: user + system ms of this process, every thread;
// faults: minor page faults).
async function timed (fn) {
  const cpu = process.cpuUsage()
  const faults = process.resourceUsage().minorPageFault
  const start = now()
  await fn()
  const t = msSince(start)
  const used = process.cpuUsage(cpu)
  return { ms: t, cpu: (used.user + used.system) / 1000, faults: process.resourceUsage().minorPageFault - faults }
}


const cases = {
  // Writes the file and closes the store: { shardDir }, the directory of the file's shard
  // (a new store may make others ahead of their first file).
  async setup ({ dir, size }) {
    const kfs = require('../..')
    const { REF } = require('../harness/kfs-work')
    const { shardFor } = require('../../lib/shard/routing')
    const { shardDirName } = require('../../lib/base/shard-names')
    const store = kfs(dir, { referenceId: REF })
    const piece = crypto.randomBytes(MiB)
    const ws = store.createWriteStream(KEY)
    for (let i = 0; i < size; i++) {
      piece.writeUInt32LE(i, 0)
      if (!ws.write(Buffer.from(piece))) await new Promise((resolve) => ws.once('drain', resolve))
    }
    ws.end()
    await new Promise((resolve, reject) => ws.once('finish', resolve).once('error', reject))
    await store.compact()
    await store.close()
    return { shardDir: path.join(dir, shardDirName(shardFor(Buffer.from(REF, 'hex'), KEY))) }
  },

  async kfs ({ dir, reps, offsets, checkout = path.join(__dirname, '..', '..') }) {
    const kfs = require(checkout)
    const { UNCHECKED } = require(path.join(checkout, 'lib/data/chunk-reader'))
    const store = kfs(dir)
    const times = {}
    const record = (name, t) => (times[name] = times[name] || []).push(t)
    // Untimed: opens the shard, and maps the table files (LevelDB reads them through
    // mmap: a process's first read of each page faults it in).
    await drain(store.createReadStream(KEY, { [UNCHECKED]: true }))
    for (let rep = 0; rep < reps; rep++) {
      const streams = [['stream checked', {}], ['stream unchecked', { [UNCHECKED]: true }]]
      if (rep % 2) streams.reverse()
      for (const [name, options] of streams) record(name, await timed(() => drain(store.createReadStream(KEY, options))))
      const range = (offset) => drain(store.createReadStream(KEY, { start: offset, end: offset + MiB - 1 }))
      record('ranges 1', await timed(() => inFlight(1, offsets, range)))
      record('ranges 16', await timed(() => inFlight(16, offsets, range)))
    }
    await store.close()
    return times
  },

  // The bare binding on the shard's directory, with kfs's LevelDB options.
  async raw ({ shardDir, reps, offsets }) {
    const leveldown = require('leveldown')
    const { DEFAULTS } = require('../../lib/leveldb/leveldb')
    const { META } = require('../../lib/shard/records')
    const db = leveldown(shardDir)
    const call = (fn) => new Promise((resolve, reject) => fn((err, ...r) => (err ? reject(err) : resolve(r[0]))))
    await call((cb) => db.open({ ...DEFAULTS, writeBufferSize: 1.5 * MiB, createIfMissing: false }, cb))
    const meta = JSON.parse(await call((cb) => db.get(META + KEY, { asBuffer: false }, cb)))
    const keys = await listKeys(db, `${KEY} ${meta.version} `)
    if (keys.length !== meta.chunks) throw new Error(`found ${keys.length} chunk keys, ${meta.chunks} expected`)
    const chunkSize = meta.size / meta.chunks
    const times = {}
    const record = (name, t) => (times[name] = times[name] || []).push(t)
    const { intact } = require('../../lib/shard/chunk-record')
    // crc: also each record's CRC32, as kfs checks it.
    const iterate = (highWaterMark, crc = false) => new Promise((resolve, reject) => {
      const it = db.iterator({ gte: keys[0], lte: keys[keys.length - 1], keyAsBuffer: false, valueAsBuffer: true, fillCache: false, highWaterMark })
      let n = 0
      const step = () => it.next((err, key, value) => {
        if (err) return reject(err)
        if (key === undefined) return it.end(() => (n === keys.length ? resolve() : reject(new Error(`read ${n} chunks`))))
        if (crc && !intact(key, value)) return reject(new Error(`${key}: bad CRC32`))
        n += value.length > 0
        step()
      })
      step()
    })
    const get = (key) => call((cb) => db.get(key, { asBuffer: true, fillCache: false }, cb))
    const range = (offset) => Promise.all(keys.slice(offset / chunkSize, (offset + MiB) / chunkSize).map(get))
    // What a kfs range read asks of the binding: the metadata record, then one get per
    // chunk, each chunk's CRC32 checked as it arrives.
    const rangeAsKfs = async (offset) => {
      const { version } = JSON.parse(await call((cb) => db.get(META + KEY, { asBuffer: false, fillCache: false }, cb)))
      if (version !== meta.version) throw new Error('the version changed')
      await Promise.all(keys.slice(offset / chunkSize, (offset + MiB) / chunkSize).map((key) => get(key).then((value) => {
        if (!intact(key, value)) throw new Error(`${key}: bad CRC32`)
      })))
    }
    await iterate(MiB) // untimed, as in the kfs process
    for (let rep = 0; rep < reps; rep++) {
      // 1 MiB a trip, 3 chunks a trip (kfs's), and leveldown's default (16 KiB: one
      // chunk a trip).
      const shapes = [['iterator 1 MiB', MiB], ['iterator 3 a trip', 2.5 * chunkSize], ['iterator default', undefined], ['iterator 3 a trip + crc32', 2.5 * chunkSize, true]]
      for (const [name, highWaterMark, crc] of rep % 2 ? shapes.reverse() : shapes) record(name, await timed(() => iterate(highWaterMark, crc)))
      record('gets 1', await timed(() => inFlight(1, offsets, range)))
      record('gets 16', await timed(() => inFlight(16, offsets, range)))
      record('meta + gets + crc32 1', await timed(() => inFlight(1, offsets, rangeAsKfs)))
      record('meta + gets + crc32 16', await timed(() => inFlight(16, offsets, rangeAsKfs)))
    }
    await call((cb) => db.close(cb))
    return times
  }
}

function listKeys (db, prefix) {
  return new Promise((resolve, reject) => {
    const it = db.iterator({ gt: prefix, lt: prefix + '~', values: false, keyAsBuffer: false })
    const keys = []
    const step = () => it.next((err, key) => {
      if (err) return reject(err)
      if (key === undefined) return it.end(() => resolve(keys))
      keys.push(key)
      step()
    })
    step()
  })
}

async function main (args) {
  fs.mkdirSync(args.dir, { recursive: true })
  const base = fs.mkdtempSync(path.join(args.dir, 'kfs-read-path-'))
  const { bavail, bsize } = fs.statfsSync(base)
  if (bavail * bsize < args.size * MiB * 3) throw new Error(`${base} has too little free space for ${args.size} MiB`)
  const script = __filename
  try {
    const dir = path.join(base, 'store')
    const { shardDir } = await inChild(script, { name: 'setup', engine: 'kfs', dir, size: args.size })
    const results = {} // case -> [median of the round's reps in MiB/s]
    const cpu = {}
    const cpuPerGiB = {} // CPU ms per GiB read, every thread of the process
    const faultsPerMiB = {}
    for (let round = 0; round < args.rounds; round++) {
      const offsets = Array.from({ length: args.ranges }, () => crypto.randomInt(args.size) * MiB)
      const job = { dir, shardDir, size: args.size, reps: args.reps, offsets }
      const plain = args.before ? ['kfs', 'raw', 'before'] : ['kfs', 'raw']
      const engines = args.malloc ? [...plain, ...plain.map((e) => `${e} MALLOC`)] : plain
      const order = round % 2 ? engines.reverse() : engines
      for (const engine of order) {
        const [kind, tuned] = engine.split(' ')
        const name = kind === 'before' ? 'kfs' : kind
        const checkout = kind === 'before' ? args.before : undefined
        const times = await inChild(script, { ...job, name, engine, checkout }, { env: tuned && MALLOC })
        for (const [name, ts] of Object.entries(times)) {
          const mib = name.startsWith('stream') || name.startsWith('iterator') ? args.size : args.ranges
          ;(faultsPerMiB[`${engine} ${name}`] = faultsPerMiB[`${engine} ${name}`] || []).push(median(ts.map((t) => t.faults)) / mib)
          ;(cpuPerGiB[`${engine} ${name}`] = cpuPerGiB[`${engine} ${name}`] || []).push(median(ts.map((t) => t.cpu)) / mib * 1024)
          const label = `${engine} ${name}`;
          (results[label] = results[label] || []).push(mib / (median(ts.map((t) => t.ms)) / 1000));
          (cpu[label] = cpu[label] || []).push(median(ts.map((t) => t.cpu / t.ms)))
        }
      }
    }
    // Every process inherits this one's environment: glibc's settings in it apply to all.
    const inherited = Object.entries(process.env).filter(([k]) => k.startsWith('MALLOC_')).map(([k, v]) => `${k}=${v}`).join(' ')
    console.log(`node ${process.version}, ${os.cpus().length} cpus; ${args.size} MiB file, ${args.ranges} ranges of 1 MiB, ${args.rounds} rounds of ${args.reps} reps${inherited ? `; every process with ${inherited}` : ''}${args.malloc ? `; MALLOC: ${Object.entries(MALLOC).map(([k, v]) => `${k}=${v}`).join(' ')}` : ''}`)
    console.log('')
    console.log('| case | MiB/s, median of rounds | spread | cores busy | CPU ms per GiB | page faults per MiB |')
    console.log('|---|---|---|---|---|---|')
    for (const label of Object.keys(results).sort()) {
      const rates = results[label]
      console.log(`| ${label} | ${fmt(median(rates))} | ${fmt(Math.min(...rates))}-${fmt(Math.max(...rates))} | ${fmt(median(cpu[label]), 2)} | ${fmt(median(cpuPerGiB[label]))} | ${fmt(median(faultsPerMiB[label]), 1)} |`)
    }
    for (const tuned of args.malloc ? ['', ' MALLOC'] : ['']) summarize(results, args, tuned)
  } finally {
    fs.rmSync(base, { recursive: true, force: true })
  }
}

// The figures and targets of the processes run with `tuned` ('' or ' MALLOC').
function summarize (results, args, tuned) {
  const [kfs, raw, before] = ['kfs', 'raw', 'before'].map((e) => `${e}${tuned}`)
  const m = (label) => median(results[label])
  // Ratios per round (same round, side by side), then their median and spread.
  const ratio = (a, b) => results[a].map((x, i) => x / results[b][i])
  const line = (what, rs, target) => console.log(`${what}: ${fmt(median(rs), 2)} (${fmt(Math.min(...rs), 2)}-${fmt(Math.max(...rs), 2)}), target >= ${target}: ${median(rs) >= target ? 'met' : 'MISSED'}`)
  console.log('')
  if (tuned) console.log(`With${tuned}:`)
  line('checked stream / unchecked stream', ratio(`${kfs} stream checked`, `${kfs} stream unchecked`), 0.9)
  const best = results[`${raw} iterator 1 MiB`].map((x, i) => Math.max(x, results[`${raw} iterator default`][i], results[`${raw} iterator 3 a trip`][i]))
  line('checked stream / raw iterator (the fastest of the three)', results[`${kfs} stream checked`].map((x, i) => x / best[i]), 0.8)
  line('checked stream / raw iterator checking the same CRC32s (3 a trip)', ratio(`${kfs} stream checked`, `${raw} iterator 3 a trip + crc32`), 0.8)
  console.log(`raw iterator 3 a trip: with CRC32 / without: ${fmt(median(ratio(`${raw} iterator 3 a trip + crc32`, `${raw} iterator 3 a trip`)), 2)}`)
  line('ranges one at a time / checked stream', ratio(`${kfs} ranges 1`, `${kfs} stream checked`), 0.9)
  line('ranges 16 in flight / one at a time', ratio(`${kfs} ranges 16`, `${kfs} ranges 1`), 1.0)
  if (args.before) {
    for (const name of ['stream checked', 'stream unchecked', 'ranges 1', 'ranges 16']) line(`${name}: after / before`, ratio(`${kfs} ${name}`, `${before} ${name}`), 1)
  }
  console.log(`raw gets 16 in flight / one at a time: ${fmt(m(`${raw} gets 16`) / m(`${raw} gets 1`), 2)}; the same with the metadata get and CRC32s: ${fmt(m(`${raw} meta + gets + crc32 16`) / m(`${raw} meta + gets + crc32 1`), 2)}`)
  console.log(`kfs ranges / raw gets: ${fmt(m(`${kfs} ranges 1`) / m(`${raw} gets 1`), 2)} (1), ${fmt(m(`${kfs} ranges 16`) / m(`${raw} gets 16`), 2)} (16); / raw metadata get, gets and CRC32s: ${fmt(m(`${kfs} ranges 1`) / m(`${raw} meta + gets + crc32 1`), 2)} (1), ${fmt(m(`${kfs} ranges 16`) / m(`${raw} meta + gets + crc32 16`), 2)} (16)`)
  console.log(`raw ranges as kfs reads them / raw checked iterator (3 a trip): ${fmt(m(`${raw} meta + gets + crc32 1`) / m(`${raw} iterator 3 a trip + crc32`), 2)} (1), ${fmt(m(`${raw} meta + gets + crc32 16`) / m(`${raw} iterator 3 a trip + crc32`), 2)} (16)`)
}

runScript(COMMAND, { cases, main, tee: true })

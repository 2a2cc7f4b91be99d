'use strict'

// kfs's read of a small file (a piece) against its floor, in one process on the same
// shards: --pieces pieces of --size bytes are written by kfs, then passes alternate
// between kfs (readFile, with every shard open) and the floor (kfs closed; the raw
// binding opens the same shard directories with kfs's LevelDB options, gets each
// piece's head record and checks its CRC32 as kfs does, decodeHead). Each pass reads
// every piece once, in a new random order, --workers at a time. Both sides read the
// same table files with the same page cache and the same malloc state, so that the
// ratio measures kfs's own code, which the noise of a shared machine hides between
// processes. With --before CHECKOUT, each round also runs a process of the kfs at
// CHECKOUT (main, say), processes alternating, each with its own floor passes.
//
// Prints, per kfs checkout, medians over every pass of every round: reads/s over the
// floor's, CPU per read over the floor's (every thread: process.cpuUsage; and the main
// thread alone, from /proc, in 10 ms ticks), minor page faults per read (both sides),
// and garbage collections per 1,000 reads.

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const crypto = require('node:crypto')
const { PerformanceObserver } = require('node:perf_hooks')
const { inChild, now, msSince } = require('../harness/child')
const { cli, inFlight, runScript, fmt } = require('../harness/script')
const { median } = require('../harness/stats')
const { openStore, REF } = require('../harness/kfs-work')

const COMMAND = cli(__filename, {
  options: [
    { name: '--size', type: 'size', arg: 'BYTES', default: 62068, help: 'a piece\'s size: 62068, 4K, 1K' },
    { name: '--pieces', type: 'count', default: 5000, help: 'pieces written, each read once a pass' },
    { name: '--workers', type: 'count', default: 5, help: 'reads in flight' },
    { name: '--passes', type: 'count', default: 3, help: 'passes of kfs and of the floor per process' },
    { name: '--rounds', type: 'count', default: 3, help: 'rounds' },
    { name: '--dir', type: 'string', arg: 'DIR', default: process.env.KFS_PERF_DIR || os.tmpdir(), shown: '$KFS_PERF_DIR, else the temp dir', help: 'where the stores go' },
    { name: '--before', type: 'path', arg: 'CHECKOUT', help: 'also run the kfs at CHECKOUT, in processes of its own' }
  ]
})

const call = (fn) => new Promise((resolve, reject) => fn((err, value) => (err ? reject(err) : resolve(value))))

// The main thread's CPU (us, 10 ms ticks) and minor page faults so far.
function mainThread () {
  const fields = fs.readFileSync(`/proc/self/task/${process.pid}/stat`, 'utf8').split(') ')[1].split(' ')
  return { cpu: (Number(fields[11]) + Number(fields[12])) * 10000, faults: Number(fields[7]) }
}

let collections = 0
new PerformanceObserver((list) => { collections += list.getEntries().length }).observe({ entryTypes: ['gc'] })

// One pass: read(key) of every key once, in a random order, `workers` at a time.
async function pass (keys, workers, size, read) {
  const order = keys.map((key) => ({ key, at: Math.random() })).sort((a, b) => a.at - b.at).map(({ key }) => key)
  const cpu = process.cpuUsage()
  const main = mainThread()
  const faults = process.resourceUsage().minorPageFault
  const gcs = collections
  const start = now()
  await inFlight(workers, order, async (key) => {
    if ((await read(key)).length !== size) throw new Error(`a read of ${key} returned another size`)
  })
  const seconds = msSince(start) / 1000
  const used = process.cpuUsage(cpu)
  const n = keys.length
  return {
    rate: n / seconds,
    cpu: (used.user + used.system) / n,
    main: (mainThread().cpu - main.cpu) / n,
    faults: (process.resourceUsage().minorPageFault - faults) / n,
    gcs: 1000 * (collections - gcs) / n
  }
}

const CASES = {
  async reads ({ checkout, dir, size, pieces, workers, passes }) {
    const { shardFor } = require('../../lib/shard/routing')
    const { decodeHead } = require('../../lib/shard/head-record')
    const { DEFAULTS } = require('../../lib/leveldb/leveldb')
    const { shardDirName } = require('../../lib/base/shard-names')
    const ref = Buffer.from(REF, 'hex')
    const pool = crypto.randomBytes(size + 4 * 1024 * 1024)
    const keys = Array.from({ length: pieces }, () => crypto.randomBytes(32).toString('hex'))
    let store = await openStore(dir, undefined, checkout)
    await inFlight(workers, keys.map((key, i) => [key, i]), ([key, i]) => store.writeFile(key, pool.subarray(i % 4096 * 1024, i % 4096 * 1024 + size)))
    await store.close()
    // A key per shard, read untimed so that every shard is open before the clock.
    const firsts = new Map(keys.map((key) => [shardFor(ref, key), key]))
    const result = { kfs: [], floor: [] }
    for (let p = 0; p < passes; p++) {
      store = require(checkout)(dir, { referenceId: REF })
      for (const key of firsts.values()) await store.readFile(key)
      result.kfs.push(await pass(keys, workers, size, (key) => store.readFile(key)))
      await store.close()
      const dbs = []
      for (let i = 0; i < 256; i++) {
        const db = require('leveldown')(path.join(dir, shardDirName(i)))
        await call((cb) => db.open({ ...DEFAULTS, createIfMissing: false }, cb))
        dbs.push(db)
      }
      const options = { asBuffer: true, fillCache: false } // as lib/leveldb/leveldb.js reads
      result.floor.push(await pass(keys, workers, size, async (key) => decodeHead(key, await call((cb) => dbs[shardFor(ref, key)].get(key, options, cb))).data))
      await Promise.all(dbs.map((db) => call((cb) => db.close(cb))))
    }
    return result
  }
}

async function main (args) {
  const here = path.join(__dirname, '..', '..')
  const checkouts = args.before ? [here, path.resolve(args.before)] : [here]
  const passes = new Map(checkouts.map((c) => [c, []]))
  fs.mkdirSync(args.dir, { recursive: true })
  const base = fs.mkdtempSync(path.join(args.dir, 'kfs-piece-reads-'))
  const load = [os.loadavg()]
  try {
    for (let round = 0; round < args.rounds; round++) {
      for (let i = 0; i < checkouts.length; i++) {
        const checkout = checkouts[(i + round) % checkouts.length]
        const dir = path.join(base, `${round}-${i}`)
        process.stderr.write(`perf/probes/piece-reads.js: round ${round + 1}, ${checkout}\n`)
        const { kfs, floor } = await inChild(__filename, { name: 'reads', checkout, dir, size: args.size, pieces: args.pieces, workers: args.workers, passes: args.passes })
        fs.rmSync(dir, { recursive: true, force: true })
        kfs.forEach((k, p) => passes.get(checkout).push({ kfs: k, floor: floor[p] }))
      }
    }
  } finally {
    fs.rmSync(base, { recursive: true, force: true })
  }
  load.push(os.loadavg())
  const lines = [`${fmt(args.pieces)} pieces of ${fmt(args.size)} B, ${args.workers} in flight; ${args.rounds} rounds of ${args.passes} passes; load ${load.map((l) => l[0].toFixed(1)).join(' -> ')}`, '']
  lines.push('| kfs at | reads/s / floor | CPU / floor | main thread / floor | main us kfs, floor | faults kfs, floor | GCs per 1,000 kfs, floor |')
  lines.push('|---|---|---|---|---|---|---|')
  for (const [checkout, all] of passes) {
    const mid = (fn) => median(all.map(fn))
    const both = (field, digits) => `${fmt(mid((p) => p.kfs[field]), digits)}, ${fmt(mid((p) => p.floor[field]), digits)}`
    lines.push(`| ${checkout} | ${fmt(mid((p) => p.kfs.rate / p.floor.rate), 2)} | ${fmt(mid((p) => p.kfs.cpu / p.floor.cpu), 2)} | ${fmt(mid((p) => p.kfs.main / p.floor.main), 2)} | ${both('main', 1)} | ${both('faults', 2)} | ${both('gcs', 1)} |`)
  }
  process.stdout.write(lines.join('\n') + '\n')
}

if (require.main === module) runScript(COMMAND, { cases: CASES, main })

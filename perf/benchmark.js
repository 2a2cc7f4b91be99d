'use strict'

// The KFS experiment: does sharding a data set over size-capped LevelDB shards make
// writes, reads and unlinks faster and steadier than one LevelDB?
//
// The results: DIR/benchmark.csv (a row per measurement, written as it is measured),
// then DIR/report.md and DIR/charts/ (perf/report.js) from it. An --out or second
// argument ending in .csv is the CSV's file itself: no report then.
//
// Engines: `kfs` is the store as users get it (256 shards); `vanilla` is the same code
// with shardCount 1, one LevelDB holding the whole table, so sharding is the only
// difference. Each trial writes, reads back (checked outside the timing) and unlinks a
// file of every size on each engine, engines interleaved; rows are written as they
// are measured. Each engine runs in its own child process: LevelDB runs every flush and
// compaction of a process on one background thread, so two engines in one process
// would delay each other's writes. For the same reason an engine's turn starts once the
// other engines' processes are quiet (perf/harness/child.js, quiet): the compactions one leaves
// behind would otherwise share the disk with the next one's writes. What an engine
// leaves for its own next turn still counts against it.

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const crypto = require('node:crypto')
const { fork } = require('node:child_process')
const kfs = require('..')
const { diskUsage } = require('../lib/dir/disk-usage')
const { Progress } = require('../lib/cli/progress')
const { humanSize } = require('../lib/cli/text')
const { cli, parseCommandLine, UsageError, machineOf, quickMark } = require('./harness/script')
const { quiet } = require('./harness/child')

const MiB = 1024 * 1024
const ENGINES = { kfs: {}, vanilla: { shardCount: 1 } }
const HEADER = 'trial,engine,operation,size_bytes,ms,mib_per_s,shard,db_disk_bytes,timestamp'
// Fresh random bytes per file, outside the timing: each file's first FRESH bytes are
// redrawn, the rest was drawn once per size (LevelDB runs uncompressed, so the bytes
// only need to be random and each file distinct).
const FRESH = 256 * 1024

const COMMAND = cli(__filename, {
  run: 'npm run benchmark --',
  positional: [
    { key: 'trials', name: 'trials', type: 'count', help: 'trials, as --trials' },
    { key: 'csv', name: 'results.csv', help: 'the CSV\'s file (no report then)' }
  ],
  options: [
    { name: '--trials', type: 'count', default: 100, help: 'trials' },
    { name: '--sizes', type: 'list', of: 'number', default: [8, 16, 32, 64, 128, 256, 512], help: 'file sizes in MiB' },
    { name: '--engines', type: 'list', values: Object.keys(ENGINES), default: Object.keys(ENGINES), help: 'the engines' },
    { name: '--dir', type: 'string', arg: 'DIR', default: process.env.KFS_PERF_DIR || os.tmpdir(), shown: '$KFS_PERF_DIR, else the temp dir', help: 'where the databases live' },
    { name: '--quick', type: 'flag', sets: { trials: 2, sizes: [1, 2, 4], quick: true }, help: '2 trials of 1, 2 and 4 MiB: a one-minute smoke run, which measures nothing (its report and charts say so)' },
    { name: '--grow', type: 'flag', help: 'keep every file instead of unlinking it, so the databases grow' },
    { name: '--keep', type: 'flag', help: 'keep the databases at the end' }
  ],
  defaults: { quick: false },
  check (args) {
    // --out FILE.csv, or a second argument: the CSV itself.
    if (args.csv === undefined && /\.csv$/i.test(args.out || '')) args.csv = args.out
    if (args.csv !== undefined) args.out = path.dirname(args.csv)
  }
})

const parseArgs = (argv) => COMMAND.parse(argv)

// The most disk the run may take. With --grow every file stays. Otherwise the space of
// unlinked files comes back: kfs reclaims it in the background once its shards hold
// 256 MiB of it, and the single vanilla LevelDB compacts all the time; each engine is
// allowed two sweeps of data plus 1 GiB (measured: kfs at most 0.27 GB, vanilla 0.45 GB
// over 40 files of 128 MiB written and unlinked).
function diskNeeded ({ sizes, engines, trials, grow }) {
  const sweep = sizes.reduce((a, b) => a + b, 0) * MiB
  const perEngine = grow ? sweep * trials : 2 * sweep + 1024 * MiB
  return engines.length * perEngine * 1.1
}

function freeBytes (dir) {
  const { bavail, bsize } = fs.statfsSync(dir)
  return bavail * bsize
}

async function timed (fn) {
  const start = process.hrtime.bigint()
  await fn()
  return Number(process.hrtime.bigint() - start) / 1e6
}

async function run (args, log = process.stderr) {
  fs.mkdirSync(args.dir, { recursive: true })
  const needed = diskNeeded(args)
  if (freeBytes(args.dir) < needed) {
    throw new Error(`${args.dir} has ${humanSize(freeBytes(args.dir))} free; this run needs about ${humanSize(needed)}. Use fewer trials or sizes, or --dir on a larger disk.`)
  }
  const base = fs.mkdtempSync(path.join(args.dir, 'kfs-benchmark-'))
  fs.mkdirSync(args.out, { recursive: true })
  const csv = args.csv ?? path.join(args.out, 'benchmark.csv')
  const out = fs.openSync(csv, 'w')
  const emit = (line) => fs.writeSync(out, line + '\n') // synchronous: rows survive a stop midway
  const workers = Object.fromEntries(args.engines.map((e) => [e, new Worker(e, path.join(base, e))]))
  const sweep = args.sizes.reduce((a, b) => a + b, 0) * MiB
  const progress = Progress.create({ stream: log, total: args.trials * args.engines.length * sweep * 2, label: '' })
  let trial
  try {
    emit(HEADER)
    for (trial = 1; trial <= args.trials; trial++) {
      if (freeBytes(base) < 2 * sweep * args.engines.length) {
        log.write(`benchmark: stopping before trial ${trial}: only ${humanSize(freeBytes(base))} free\n`)
        break
      }
      // Alternate which engine goes first, so drift and caches favour neither.
      const engines = trial % 2 ? args.engines : [...args.engines].reverse()
      for (const engine of engines) {
        await quiet(args.engines.filter((e) => e !== engine).map((e) => workers[e].child.pid))
        for (const size of args.sizes) {
          if (progress) progress.label = `trial ${trial}/${args.trials} ${engine} ${size} MiB`
          const rows = await workers[engine].ask({ size, grow: args.grow })
          for (const { operation, bytes, ms, shard, disk, at } of rows) {
            const rate = operation === 'unlink' ? '' : (bytes / MiB / (ms / 1000)).toFixed(2)
            emit([trial, engine, operation, bytes, ms.toFixed(3), rate, shard, disk, at].join(','))
          }
          if (progress) progress.advance(2 * size * MiB)
        }
      }
    }
  } finally {
    if (progress) progress.finish()
    await Promise.allSettled(Object.values(workers).map((w) => w.close()))
    fs.closeSync(out)
    if (args.keep) log.write(`benchmark: databases kept in ${base}\n`)
    else fs.rmSync(base, { recursive: true, force: true })
  }
  return { trials: Math.min(trial, args.trials), base, csv }
}

// One engine's child process, asked for one file size at a time.
class Worker {
  constructor (engine, location) {
    this.engine = engine
    this.child = fork(__filename, ['--worker', engine, location], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] })
    this.exited = new Promise((resolve) => this.child.once('exit', (code, signal) => resolve(signal || code)))
    this.exited.then((how) => this.#fail(new Error(`the ${engine} worker exited (${how})`)))
    this.child.on('message', (message) => {
      const pending = this.pending
      this.pending = undefined
      if (!pending) return
      if (message.error) pending.reject(new Error(`${engine}: ${message.error}`))
      else pending.resolve(message.rows)
    })
  }

  ask (job) {
    return new Promise((resolve, reject) => {
      this.pending = { resolve, reject }
      this.child.send(job)
    })
  }

  #fail (err) {
    if (this.pending) this.pending.reject(err)
    this.pending = undefined
  }

  async close () {
    if (this.child.connected) this.child.send({ close: true })
    await this.exited
  }
}

// The child: writes, reads back and unlinks one file of the size asked, and answers
// with the rows measured. Sizes' random bytes are drawn once, a file's first FRESH
// bytes again for each file.
function serve (engine, location) {
  const store = kfs(location, ENGINES[engine])
  const data = new Map()
  process.on('message', async ({ size, grow, close }) => {
    try {
      if (close) {
        await store.close()
        process.disconnect()
        return
      }
      if (!data.has(size)) data.set(size, crypto.randomBytes(Math.round(size * MiB)))
      const file = data.get(size)
      crypto.randomFillSync(file, 0, Math.min(FRESH, file.length))
      const key = crypto.randomBytes(32).toString('hex')
      const rows = []
      const row = async (operation, ms) => {
        rows.push({ operation, bytes: file.length, ms, shard, disk: await diskUsage(store.location), at: new Date().toISOString() })
      }
      const writeMs = await timed(() => store.writeFile(key, file))
      const shard = (await store.stat(key)).shard
      await row('write', writeMs)
      let back
      const readMs = await timed(async () => (back = await store.readFile(key)))
      if (!back.equals(file)) throw new Error(`read back different bytes for ${key}`)
      back = undefined
      await row('read', readMs)
      if (!grow) await row('unlink', await timed(() => store.unlink(key)))
      process.send({ rows })
    } catch (err) {
      process.send({ error: err.message })
    }
  })
}

const log = (text) => process.stderr.write(`perf/benchmark.js: ${text}\n`)

module.exports = { COMMAND, parseArgs, run, diskNeeded, HEADER, UsageError }

if (require.main === module && process.argv[2] === '--worker') {
  serve(process.argv[3], process.argv[4])
} else if (require.main === module) {
  const args = parseCommandLine(COMMAND)
  run(args).then(({ csv }) => {
    if (args.csv !== undefined) return log(`wrote ${csv}`)
    const { file, charts } = require('./report').report(csv, args.out, { machine: machineOf(args.dir), mark: args.quick ? quickMark('sizes') : undefined })
    log(`wrote ${csv}, ${file} and ${charts.length} charts in ${path.join(args.out, 'charts')}`)
  }).catch((err) => {
    process.stderr.write(`perf/benchmark.js: ${err.message}\n`)
    process.exitCode = 1
  })
}

'use strict'

// fio-style throughput tables: the jobs of two published reports, run on kfs, on vanilla
// (kfs with shardCount 1) and on plain files in the same directory, each engine in its
// own child process, one cell at a time, engines side by side.
//
// The charts' published series (GCSFuse's figures, on other hardware) are drawn in grey
// and say so in their legend. --from-csv FILE runs nothing: it draws the charts again
// from a fio.csv written before, into --out; add --quick for a quick run's CSV, so that
// its charts say so.
//
// Sizes take K, M, G (powers of 1024) or bytes. What each engine does per operation:
// a write is one block written to a kfs write stream (awaited) or one fs write() at the
// end of an open file; a sequential read is the next block of one kfs read stream over
// the whole file (its SHA-256 checked at the end) or one fs read() at the next offset;
// a random read is a kfs range read of one block (createReadStream with start and end)
// or one fs read() at a block-aligned random offset. Latency is measured per block.

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const crypto = require('node:crypto')
const async = require('async')
const { inChild, now, msSince } = require('./harness/child')
const { cli, runScript, writeOut, chartsOf, quickMark, machineOf, machineFor, MACHINE_OPTION, fmt, KiB, MiB, GiB } = require('./harness/script')
const { barChart } = require('./harness/svg')
const stats = require('./harness/stats')
// Published figures of other systems on other hardware, beside ours in the report.
const PUBLISHED = require('./harness/published')

const SELF = __filename
const ENGINES = ['kfs', 'vanilla', 'fs']
const HEADER = 'engine,part,test,file_size_bytes,files,jobs,block_bytes,seconds,bytes,ops,mib_per_s,gib_per_s,iops,avg_ms,p99_ms'

const QUICK = { large: 8 * MiB, files: 4, fileSize: 2 * MiB, sizes: [256 * KiB, MiB, 3 * MiB], jobs: 4, time: 0.3, set: 8 * MiB, quick: true }
const COMMAND = cli(__filename, {
  run: 'npm run benchmark:fio --',
  options: [
    { name: '--engines', type: 'list', values: ENGINES, default: ENGINES, help: 'the engines to run' },
    { name: '--large', type: 'size', default: 10 * GiB, shown: '10G, like CubeFS', help: 'sequential part: one file of SIZE, one job' },
    { name: '--files', type: 'count', default: 32, help: 'sequential part: N files, N jobs' },
    { name: '--file-size', type: 'size', default: GiB, shown: '1G', help: '... each of SIZE' },
    { name: '--sizes', type: 'list', of: 'size', default: [256 * KiB, MiB, 2 * MiB, 5 * MiB, 10 * MiB, 50 * MiB, 100 * MiB, 200 * MiB, GiB], shown: '256K,1M,2M,5M,10M,50M,100M,200M,1G, like GCSFuse', help: 'by-size part: file sizes' },
    { name: '--jobs', type: 'count', default: 40, help: 'by-size part: concurrent jobs' },
    { name: '--bs', type: 'size', default: MiB, shown: '1M', help: 'block size of every read and write' },
    { name: '--time', type: 'number', arg: 'S', default: 10, shown: '10; GCSFuse ran 60', help: 'by-size part: seconds per cell' },
    { name: '--set', type: 'size', default: 4 * GiB, shown: '4G', help: 'by-size part: at most this much data per cell; beyond it jobs share files, job j reading file j mod files' },
    { name: '--dir', type: 'string', arg: 'DIR', default: process.env.KFS_PERF_DIR || os.tmpdir(), shown: '$KFS_PERF_DIR, else the temp dir', help: 'where the engines\' data lives' },
    { name: '--quick', type: 'flag', sets: QUICK, help: 'tiny sizes, for CI: proves the script runs, measures nothing' },
    { name: '--from-csv', type: 'string', arg: 'FILE', help: 'run nothing: draw the charts again from a fio.csv, into --out' },
    MACHINE_OPTION
  ],
  defaults: { quick: false },
  check (args) {
    args.engines = [...new Set(args.engines)]
    args.sizes = [...new Set(args.sizes)]
  }
})

// One engine's files in `dir`: write(name, size, block, onBlock), readSequential and
// readRange, each calling onBlock(bytes, ms) per block (readSequential until stop()
// says so), and close().
function openEngine (engine, dir) {
  if (engine === 'fs') return plainFiles(dir)
  const store = require('..')(dir, engine === 'vanilla' ? { shardCount: 1 } : {})
  return {
    async write (name, size, block, onBlock) {
      const stream = store.createWriteStream(name)
      const failed = new Promise((resolve, reject) => stream.once('error', reject))
      failed.catch(() => {}) // met below, by the write or end that fails
      for (let offset = 0; offset < size; offset += block.length) {
        const part = block.subarray(0, Math.min(block.length, size - offset))
        const start = now()
        await Promise.race([failed, new Promise((resolve, reject) => stream.write(part, (err) => (err ? reject(err) : resolve())))])
        onBlock(part.length, msSince(start))
      }
      await Promise.race([failed, new Promise((resolve, reject) => stream.end((err) => (err ? reject(err) : resolve())))])
    },
    // Reads the file from start to end once, in blocks of bs.
    async readSequential (name, size, bs, onBlock, stop) {
      let pending = 0
      let start = now()
      for await (const piece of store.createReadStream(name)) {
        pending += piece.length
        while (pending >= bs) {
          pending -= bs
          onBlock(bs, msSince(start))
          start = now()
          if (stop()) return
        }
      }
      if (pending > 0) onBlock(pending, msSince(start))
    },
    async readRange (name, offset, length, onBlock) {
      const start = now()
      let got = 0
      for await (const piece of store.createReadStream(name, { start: offset, end: offset + length - 1 })) got += piece.length
      if (got !== length) throw new Error(`${name}: a range read of ${length} bytes returned ${got}`)
      onBlock(length, msSince(start))
    },
    close: () => store.close()
  }
}

// Plain files, read through handles kept open per file and job, as fio keeps its files
// open; each job reads into a buffer of its own.
function plainFiles (dir) {
  fs.mkdirSync(dir, { recursive: true })
  const where = (name) => path.join(dir, name)
  const handles = new Map()
  const buffers = new Map()
  const handleFor = async (name, job) => {
    const id = `${name} ${job}`
    if (!handles.has(id)) handles.set(id, fs.promises.open(where(name), 'r'))
    return handles.get(id)
  }
  const bufferFor = (size, job) => {
    const id = `${size} ${job}`
    if (!buffers.has(id)) buffers.set(id, Buffer.allocUnsafe(size))
    return buffers.get(id)
  }
  const read = async (name, offset, length, onBlock, job) => {
    const handle = await handleFor(name, job)
    const start = now()
    const { bytesRead } = await handle.read(bufferFor(length, job), 0, length, offset)
    if (bytesRead !== length) throw new Error(`${name}: a read of ${length} bytes returned ${bytesRead}`)
    onBlock(length, msSince(start))
  }
  return {
    async write (name, size, block, onBlock) {
      const handle = await fs.promises.open(where(name), 'w')
      try {
        for (let offset = 0; offset < size; offset += block.length) {
          const length = Math.min(block.length, size - offset)
          const start = now()
          const { bytesWritten } = await handle.write(block, 0, length)
          if (bytesWritten !== length) throw new Error(`${name}: a write of ${length} bytes wrote ${bytesWritten}`)
          onBlock(length, msSince(start))
        }
      } finally {
        await handle.close()
      }
    },
    async readSequential (name, size, bs, onBlock, stop, job = 0) {
      for (let offset = 0; offset < size && !stop(); offset += bs) await read(name, offset, Math.min(bs, size - offset), onBlock, job)
    },
    readRange: (name, offset, length, onBlock, job = 0) => read(name, offset, length, onBlock, job),
    async close () {
      for (const handle of handles.values()) await (await handle).close()
    }
  }
}

// Latencies and bytes of one cell, and what they come to.
class Cell {
  constructor () {
    this.bytes = 0
    this.latencies = []
    this.start = now()
  }

  onBlock = (bytes, ms) => {
    this.bytes += bytes
    this.latencies.push(ms)
  }

  result () {
    const seconds = msSince(this.start) / 1000
    const ops = this.latencies.length
    return {
      seconds,
      bytes: this.bytes,
      ops,
      mibPerS: this.bytes / MiB / seconds,
      iops: ops / seconds,
      avgMs: ops ? stats.mean(this.latencies) : 0,
      p99Ms: ops ? stats.percentile(this.latencies, 99) : 0
    }
  }
}

const fileName = (size, i) => `f-${size}-${i}`

// Writes `count` files of `size` with `jobs` at once, one file per job at a time.
async function writeFiles (engine, count, size, bs, jobs) {
  const cell = new Cell()
  const block = crypto.randomBytes(bs) // the content does not matter: nothing compresses it
  await async.eachLimit(Array.from({ length: count }, (_, i) => i), jobs, async (i) => {
    await engine.write(fileName(size, i), size, block, cell.onBlock)
  })
  return cell.result()
}

const CASES = {
  // The sequential part: `files` files of `size` written by as many jobs, then read.
  async sequential ({ engine: name, dir, files, size, bs }) {
    const engine = openEngine(name, dir)
    try {
      const write = await writeFiles(engine, files, size, bs, files)
      const cell = new Cell()
      await async.times(files, async (i) => engine.readSequential(fileName(size, i), size, bs, cell.onBlock, () => false, i))
      return { write, read: cell.result() }
    } finally {
      await engine.close()
      fs.rmSync(dir, { recursive: true, force: true })
    }
  },

  // The by-size part: `files` files of `size`, then `jobs` jobs reading them for `time`
  // seconds, sequentially (each job from the start of its file again and again), then
  // at random block-aligned offsets.
  async bySize ({ engine: name, dir, files, size, jobs, bs, time }) {
    const engine = openEngine(name, dir)
    try {
      await writeFiles(engine, files, size, bs, jobs)
      const timed = async (job) => {
        const cell = new Cell()
        const deadline = Date.now() + time * 1000
        const stop = () => Date.now() >= deadline
        await async.times(jobs, async (j) => {
          while (!stop()) await job(fileName(size, j % files), cell, stop, j)
        })
        return cell.result()
      }
      const blocks = Math.ceil(size / bs)
      const seq = await timed((file, cell, stop, j) => engine.readSequential(file, size, bs, cell.onBlock, stop, j))
      const rand = await timed((file, cell, stop, j) => {
        const offset = crypto.randomInt(blocks) * bs
        return engine.readRange(file, offset, Math.min(bs, size - offset), cell.onBlock, j)
      })
      return { seq, rand }
    } finally {
      await engine.close()
      fs.rmSync(dir, { recursive: true, force: true })
    }
  }
}

// The files one cell holds at once in the by-size part.
const filesFor = (args, size) => Math.max(1, Math.min(args.jobs, Math.floor(args.set / size)))

// Bytes the engines hold at most at once (one cell of one engine at a time), with room
// for LevelDB's logs and tables written before their compaction.
function diskNeeded (args) {
  const largest = Math.max(args.large, args.files * args.fileSize, ...args.sizes.map((s) => filesFor(args, s) * s))
  return Math.ceil(largest * 1.25) + GiB
}

function row (engine, part, test, size, files, jobs, bs, r) {
  return { engine, part, test, size, files, jobs, bs, ...r, gibPerS: r.mibPerS / 1024 }
}

function toCsv (rows) {
  const line = (r) => [r.engine, r.part, r.test, r.size, r.files, r.jobs, r.bs, r.seconds.toFixed(6), r.bytes, r.ops,
    r.mibPerS.toFixed(1), r.gibPerS.toFixed(3), r.iops.toFixed(1), r.avgMs.toFixed(3), r.p99Ms.toFixed(3)].join(',')
  return [HEADER, ...rows.map(line)].join('\n') + '\n'
}

const human = (bytes) => (bytes >= GiB && bytes % GiB === 0 ? `${bytes / GiB} GiB` : bytes >= MiB && bytes % MiB === 0 ? `${bytes / MiB} MiB` : `${bytes / KiB} KiB`)
const ratio = (a, b) => (a && b ? fmt(a.mibPerS / b.mibPerS, 2) : '–')

// The row of one cell: its engine, part, test, file size and, in the sequential part
// (one large file and N files may have the same size), its file count.
const cellIn = (rows) => (engine, part, test, size, files) => rows.find((r) => r.engine === engine && r.part === part && r.test === test && r.size === size && (files === undefined || r.files === files))

// One table per metric, each within 100 columns: MiB/s with the ratios of kfs to the
// others, then IOPS, then average and p99 latency. cases: [{ label, cell(engine) }].
function metricTables (add, engines, cases, first) {
  const ratios = ['fs', 'vanilla'].filter((e) => engines.includes(e) && engines.includes('kfs'))
  const metrics = [
    ['MiB/s (higher is better)', (c) => fmt(c.mibPerS)],
    ['IOPS (higher is better)', (c) => fmt(c.iops)],
    ['avg ms per block (lower is better)', (c) => fmt(c.avgMs, 2)],
    ['p99 ms per block (lower is better)', (c) => fmt(c.p99Ms, 2)]
  ]
  metrics.forEach(([name, value], m) => {
    const extra = m === 0 ? ratios.map((e) => `kfs / ${e}`) : []
    add(`${name}:`)
    add()
    add(`| ${first} | ${[...engines, ...extra].join(' | ')} |`)
    add(`|---|${[...engines, ...extra].map(() => '---').join('|')}|`)
    for (const { label, cell } of cases) {
      const cells = engines.map((e) => (cell(e) ? value(cell(e)) : '–'))
      const k = cell('kfs')
      add(`| ${label} | ${[...cells, ...(m === 0 ? ratios.map((e) => ratio(k, cell(e))) : [])].join(' | ')} |`)
    }
    add()
  })
}

function report (args, rows) {
  const engines = args.engines
  const find = cellIn(rows)
  const lines = []
  const add = (line = '') => lines.push(line)
  add('# fio-style throughput: kfs, vanilla and plain files')
  add()
  add(`Measured with \`node perf/fio.js ${process.argv.slice(2).join(' ')}\` on ${machineOf(args.dir)}, ${new Date().toISOString().slice(0, 10)}; each engine in its own process, one cell at a time. Blocks of ${human(args.bs)}.${args.quick ? ` **${quickMark('sizes')}.**` : ''}`)
  add()
  add(`## Sequential write and read (like CubeFS's fio runs)`)
  add()
  add('One run per cell: no statistics. avg and p99 are over the blocks of the cell.')
  add()
  const seqCells = [[args.large, 1], [args.fileSize, args.files]]
  const seqLabel = (size, jobs) => `${jobs} file${jobs > 1 ? 's' : ''} of ${human(size)}, ${jobs} job${jobs > 1 ? 's' : ''}`
  for (const test of ['seq-write', 'seq-read']) {
    add(`### ${test === 'seq-write' ? 'Write' : 'Read'}`)
    add()
    metricTables(add, engines, seqCells.map(([size, jobs]) => ({ label: seqLabel(size, jobs), cell: (e) => find(e, 'sequential', test, size, jobs) })), 'case')
  }
  add(`Published, other systems on other hardware: ${PUBLISHED.cubefs.text}`)
  add()
  add(`## Reads by file size, ${args.jobs} jobs, ${fmt(args.time, 1)} s per cell (like GCSFuse's fio runs)`)
  add()
  add(`Each cell holds ${args.jobs} files, or as many as fit in ${human(args.set)} (then jobs share them): ${args.sizes.map((s) => `${human(s)}: ${filesFor(args, s)}`).join(', ')}.`)
  add()
  for (const test of ['seq-read', 'rand-read']) {
    add(`### ${test === 'seq-read' ? 'Sequential' : 'Random'} reads`)
    add()
    metricTables(add, engines, args.sizes.map((size) => ({ label: human(size), cell: (e) => find(e, 'by-size', test, size) })), 'file size')
  }
  add('### Random against sequential reads of the same files')
  add()
  add(`| file size | ${engines.map((e) => `${e} random / sequential`).join(' | ')} |`)
  add(`|---|${engines.map(() => '---').join('|')}|`)
  for (const size of args.sizes) {
    add(`| ${human(size)} | ${engines.map((e) => ratio(find(e, 'by-size', 'rand-read', size), find(e, 'by-size', 'seq-read', size))).join(' | ')} |`)
  }
  add()
  add(`Published, other systems on other hardware: ${PUBLISHED.gcsfuse.text}`)
  add()
  add('![Sequential reads by file size](fio-seq-read.svg)')
  add('![Sequential reads, kfs against the others](fio-seq-read-ratio.svg)')
  add('![Random reads by file size](fio-rand-read.svg)')
  add('![Random reads, kfs against the others](fio-rand-read-ratio.svg)')
  add()
  return lines.join('\n')
}

// Bandwidth by file size per engine, with GCSFuse's published figures for the sizes it
// measured (KiB keys), marked as such; drawn from the CSV's rows (chartsOf), the run's
// and --from-csv's alike. On a log axis: plain files read from the page cache ran at up
// to 25 times kfs's rate in the committed run, which left kfs's bars slivers on a
// linear one.
function charts (rows, args) {
  const bySize = rows.filter((r) => r.part === 'by-size')
  if (!bySize.length) return {}
  const engines = [...new Set(bySize.map((r) => r.engine))]
  const sizes = [...new Set(bySize.map((r) => r.size))]
  const find = cellIn(rows)
  const machine = machineFor(args, args.dir)
  const mark = args.quick ? quickMark('sizes') : undefined
  const seconds = Math.round(Math.max(...bySize.map((r) => r.seconds || 0)))
  const runs = `n = 1: one run${seconds ? ` of ${seconds} s` : ''} per bar, ${bySize[0].jobs} jobs, ${human(bySize[0].bs)} blocks`
  const out = {}
  for (const test of ['seq-read', 'rand-read']) {
    const what = test === 'seq-read' ? 'Sequential' : 'Random'
    const series = engines.map((e) => ({ name: e, values: sizes.map((s) => (find(e, 'by-size', test, s) || {}).mibPerS) }))
    const published = sizes.map((s) => PUBLISHED.gcsfuse.bySize[test][s / KiB] * 1024)
    if (published.some(Number.isFinite)) series.push({ name: 'GCSFuse (published, other hardware)', grey: true, values: published })
    out[`fio-${test}.svg`] = barChart({
      title: `${what} reads by file size: MiB/s (higher is better)`,
      subtitle: [`${runs}; ${machine}`, 'grey: GCSFuse\'s published figures, an n2-standard-48 VM reading Cloud Storage'],
      mark,
      xLabel: 'file size',
      yLabel: 'MiB/s',
      yScale: 'log',
      groups: sizes.map(human),
      series
    })
    const others = ['vanilla', 'fs'].filter((e) => engines.includes(e) && engines.includes('kfs'))
    if (!others.length) continue
    const rate = (e, s) => (find(e, 'by-size', test, s) || {}).mibPerS
    out[`fio-${test}-ratio.svg`] = barChart({
      title: `${what} reads: kfs MiB/s / other MiB/s (higher is better for kfs)`,
      subtitle: [`above 1.0 kfs is faster; ${runs}`, machine],
      mark,
      xLabel: 'file size',
      yLabel: 'kfs / other',
      yScale: 'log',
      reference: 1,
      referenceLabel: '1.0: as fast',
      groups: sizes.map(human),
      series: others.map((e) => ({ name: `kfs / ${e}`, values: sizes.map((s) => rate('kfs', s) / rate(e, s)) }))
    })
  }
  return out
}

// A row as charts() needs it, from a record of fio.csv.
const fromCsv = (r) => ({ engine: r.engine, part: r.part, test: r.test, size: Number(r.file_size_bytes), jobs: Number(r.jobs), bs: Number(r.block_bytes), seconds: Number(r.seconds), mibPerS: Number(r.mib_per_s) })
const REDRAW = { header: HEADER, fromCsv, charts }

async function main (args) {
  fs.mkdirSync(args.dir, { recursive: true })
  const needed = diskNeeded(args)
  const { bavail, bsize } = fs.statfsSync(args.dir)
  if (bavail * bsize < needed) throw new Error(`${args.dir} has ${fmt(bavail * bsize / GiB, 1)} GiB free; this run needs about ${fmt(needed / GiB, 1)} GiB (use --dir, or smaller --large, --files, --file-size or --set)`)
  const base = fs.mkdtempSync(path.join(args.dir, 'kfs-fio-'))
  const rows = []
  const progress = (text) => process.stderr.write(`perf/fio.js: ${text}\n`)
  try {
    let n = 0
    const place = () => path.join(base, String(n++))
    for (const [size, files] of [[args.large, 1], [args.fileSize, args.files]]) {
      for (const engine of args.engines) {
        progress(`${engine}: ${files} x ${human(size)}, sequential write and read`)
        const r = await inChild(SELF, { name: 'sequential', engine, dir: place(), files, size, bs: args.bs })
        rows.push(row(engine, 'sequential', 'seq-write', size, files, files, args.bs, r.write))
        rows.push(row(engine, 'sequential', 'seq-read', size, files, files, args.bs, r.read))
      }
    }
    for (const size of args.sizes) {
      for (const engine of args.engines) {
        const files = filesFor(args, size)
        progress(`${engine}: ${files} x ${human(size)}, ${args.jobs} jobs reading`)
        const r = await inChild(SELF, { name: 'bySize', engine, dir: place(), files, size, jobs: args.jobs, bs: args.bs, time: args.time })
        rows.push(row(engine, 'by-size', 'seq-read', size, files, args.jobs, args.bs, r.seq))
        rows.push(row(engine, 'by-size', 'rand-read', size, files, args.jobs, args.bs, r.rand))
      }
    }
  } finally {
    fs.rmSync(base, { recursive: true, force: true })
  }
  const markdown = report(args, rows)
  const csv = toCsv(rows)
  writeOut(args.out, { 'fio.csv': csv, 'fio.md': markdown, ...chartsOf(csv, args, REDRAW) })
  process.stdout.write(markdown + '\n')
  progress(`wrote fio.csv, fio.md and charts to ${args.out}`)
}

if (require.main === module) runScript(COMMAND, { cases: CASES, main, redraw: REDRAW })

module.exports = { HEADER, COMMAND }

'use strict'

// A store grown as a storage node's grows: pieces of 8 KiB uploaded by 5 workers into a
// new store, through checkpoints (10,000, 100,000 and 1,000,000 pieces held). At each
// checkpoint, for each engine:
// - upload: pieces/s (and MiB/s) over the segment since the last checkpoint;
// - download: --reads random pieces (distinct; every piece, in a random order, when the
//   engine holds fewer), the same number of workers, every byte compared: reads/s, warm;
// - reopen: close (ms), open again (ms), the first read of a random piece, alone (ms),
//   then more random reads, the same workers, up to --after-reopen with the first:
//   their reads/s, and that over the warm rate;
// - list: closed and opened again, then every piece listed (kfs: list(); one raw
//   LevelDB: a keys-only iterator; files: a read of the 256 directories), ms, the count
//   checked against the pieces held;
// - memory: the peak of private memory (RssAnon) in each phase and over the checkpoint,
//   and of RSS and open descriptors, sampled every 20 ms (perf/harness/piece-engines.js);
// - disk: blocks allocated to the engine's directory (as `du` counts them) over the
//   live pieces' bytes, after the listing.
// Pieces are random bytes under random 32-byte IDs in hex, both derived from the piece's
// index, so that the measured process holds nothing per piece.
//
// Engines, each in a process of its own that holds its store through the whole growth
// (LevelDB runs every compaction of a process on one thread); at each checkpoint the
// engines take turns, the first rotated checkpoint by checkpoint, so that each
// checkpoint of every engine is measured close together in time:
// - kfs: a new store (its shards made by its first pieces), its default options but
//   --memory;
// - leveldb: one raw LevelDB (leveldown, kfs's LevelDB options), a piece per value;
// - files: one file per piece, Storj's old piece store: a temporary file renamed to
//   DIR/ab/cdef... in 256 directories.
//
// Writes grow.csv (a row per engine and checkpoint), grow.md (a table per measure,
// engines x checkpoints, with ratios to one raw LevelDB; also printed) and a chart of
// each measure against the pieces held (grow-<measure>.svg). --from-csv FILE runs
// nothing: it draws the charts again from a grow.csv, into --out.

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const crypto = require('node:crypto')
const { runSteps, now, msSince } = require('./harness/child')
const { cli, inFlight, runScript, writeOut, chartsOf, quickMark, machineFor, commitOf, filesystemOf, UsageError, MACHINE_OPTION, fmt, MiB } = require('./harness/script')
const { lineChart } = require('./harness/svg')
const { diskBytes } = require('./harness/usage')
const { pieceSet, openEngine, sampler, shuffled } = require('./harness/piece-engines')
const { machine } = require('./harness/rounds')
const { MEMORY } = require('../lib/api/memory')

const SELF = __filename
const ENGINES = ['kfs', 'leveldb', 'files']
const NAMES = { kfs: 'kfs', leveldb: 'one raw LevelDB', files: 'files (temp file, rename)' }
const BASE = 'leveldb' // what the ratios are to
const PHASES = ['upload', 'download', 'reopen', 'list']

const COMMAND = cli(__filename, {
  run: 'npm run benchmark:grow --',
  options: [
    { name: '--size', type: 'size', arg: 'BYTES', default: 8192, help: 'a piece\'s size: 8K, 62068, 1M' },
    { name: '--checkpoints', type: 'list', of: 'count', default: [10000, 100000, 1000000], help: 'the pieces held at each checkpoint, increasing, comma-separated' },
    { name: '--workers', type: 'count', default: 5, help: 'uploads, and reads, in flight' },
    { name: '--reads', type: 'count', default: 10000, help: 'random reads at each checkpoint (every piece, when fewer are held)' },
    { name: '--after-reopen', type: 'count', default: 1000, help: 'random reads timed after each reopen, the first alone' },
    { name: '--engines', type: 'list', values: ENGINES, default: ENGINES, help: `the engines to run, comma-separated: ${ENGINES.join(', ')}` },
    { name: '--memory', type: 'size', arg: 'BYTES', shown: '128M, kfs\'s default', help: 'kfs\'s memory budget (the `memory` option): 64M, 1G' },
    { name: '--dir', type: 'string', arg: 'DIR', default: process.env.KFS_PERF_DIR || os.tmpdir(), shown: '$KFS_PERF_DIR, else the temp dir', help: 'where the stores go: a new directory made in it and removed at the end' },
    { name: '--quick', type: 'flag', sets: { size: 4096, checkpoints: [60, 150], reads: 50, afterReopen: 40, quick: true }, help: 'tiny sizes, for the tests: proves the script runs, measures nothing' },
    { name: '--from-csv', type: 'string', arg: 'FILE', help: 'run nothing: draw the charts again from a grow.csv, into --out' },
    MACHINE_OPTION
  ],
  defaults: { quick: false },
  check (args) {
    if (args.checkpoints.some((c, i) => i > 0 && c <= args.checkpoints[i - 1])) throw new UsageError(`--checkpoints must increase, got ${args.checkpoints.join(',')}`)
    args.engines = ENGINES.filter((e) => args.engines.includes(e))
  }
})

// `n` distinct pieces of the `held`, in a random order.
function randomPieces (held, n) {
  if (2 * n > held) return shuffled(held).slice(0, n)
  const picked = new Set()
  while (picked.size < n) picked.add(crypto.randomInt(held))
  return [...picked]
}

const timed = async (fn) => {
  const start = now()
  await fn()
  return msSince(start)
}

const CASES = {
  // One engine growing through the checkpoints, in a child serving steps (runSteps): a
  // step grows it to the next checkpoint and measures it, returning its row.
  async grow ({ engine, dir, size, checkpoints, workers, reads, afterReopen, memory }) {
    const { key, content } = pieceSet(size)
    const open = () => openEngine(engine, dir, true, memory)
    let store = await open()
    let held = 0
    const peaks = sampler()
    // fn's result with the peaks of memory while it ran.
    const phase = async (fn) => {
      peaks.start()
      const result = await fn()
      return { ...result, peak: peaks.stop() }
    }
    const read = async (i) => {
      const data = await store.get(key(i))
      if (!content(i).equals(data)) throw new Error(`${engine} returned other bytes for piece ${i}`)
    }
    const step = async () => {
      const from = held
      const to = checkpoints[checkpoints.indexOf(held) + 1]
      process.stderr.write(`perf/grow.js: ${engine}, ${fmt(from)} to ${fmt(to)} pieces\n`)
      const upload = await phase(async () => ({ ms: await timed(() => inFlight(workers, to - from, (i) => store.put(key(from + i), content(from + i)))) }))
      held = to
      const sample = randomPieces(held, Math.min(reads, held))
      const download = await phase(async () => ({ ms: await timed(() => inFlight(workers, sample, read)) }))
      const after = randomPieces(held, Math.min(afterReopen, held))
      const reopen = await phase(async () => {
        const closeMs = await timed(() => store.close())
        const openMs = await timed(async () => { store = await open() })
        const firstMs = await timed(() => read(after[0]))
        const restMs = await timed(() => inFlight(workers, after.slice(1), read))
        return { closeMs, openMs, firstMs, afterMs: firstMs + restMs }
      })
      // Listed by a store just opened, as after a restart.
      const list = await phase(async () => {
        await store.close()
        store = await open()
        let listed
        const ms = await timed(async () => { listed = await store.list() })
        return { ms, listed }
      })
      if (list.listed !== held) throw new Error(`${engine} listed ${list.listed} pieces, holding ${held}`)
      const overall = ['rss', 'anon', 'fds'].map((k) => Math.max(...[upload, download, reopen, list].map((p) => p.peak[k])))
      return {
        pieces: held,
        size,
        workers,
        segment: held - from,
        uploadMs: upload.ms,
        reads: sample.length,
        readMs: download.ms,
        closeMs: reopen.closeMs,
        openMs: reopen.openMs,
        firstMs: reopen.firstMs,
        afterReads: after.length,
        afterMs: reopen.afterMs,
        listMs: list.ms,
        listed: list.listed,
        peakUpload: upload.peak.anon,
        peakDownload: download.peak.anon,
        peakReopen: reopen.peak.anon,
        peakList: list.peak.anon,
        peakRss: overall[0],
        peakAnon: overall[1],
        peakFds: overall[2],
        disk: diskBytes(dir, { allocated: true })
      }
    }
    return { step, close: () => store.close() }
  }
}

const rate = (n, ms) => n / (ms / 1000)
const uploadRate = (r) => rate(r.segment, r.uploadMs)
const warmRate = (r) => rate(r.reads, r.readMs)
const afterRate = (r) => rate(r.afterReads, r.afterMs)
const live = (r) => r.pieces * r.size
const mib = (bytes) => bytes / MiB

// The CSV's columns: name, and the figure of a row; those with a field are read back
// into it by fromCsv (the others are derived, for a reader of the CSV).
const COLUMNS = [
  ['engine', (r) => r.engine, 'engine'],
  ['pieces', (r) => r.pieces, 'pieces'],
  ['piece_bytes', (r) => r.size, 'size'],
  ['workers', (r) => r.workers, 'workers'],
  ['segment_pieces', (r) => r.segment, 'segment'],
  ['upload_ms', (r) => r.uploadMs.toFixed(1), 'uploadMs'],
  ['upload_pieces_per_s', (r) => uploadRate(r).toFixed(1)],
  ['upload_mib_per_s', (r) => mib(uploadRate(r) * r.size).toFixed(2)],
  ['reads', (r) => r.reads, 'reads'],
  ['reads_ms', (r) => r.readMs.toFixed(1), 'readMs'],
  ['reads_per_s', (r) => warmRate(r).toFixed(1)],
  ['close_ms', (r) => r.closeMs.toFixed(2), 'closeMs'],
  ['open_ms', (r) => r.openMs.toFixed(2), 'openMs'],
  ['first_read_ms', (r) => r.firstMs.toFixed(3), 'firstMs'],
  ['after_reopen_reads', (r) => r.afterReads, 'afterReads'],
  ['after_reopen_ms', (r) => r.afterMs.toFixed(1), 'afterMs'],
  ['after_reopen_per_s', (r) => afterRate(r).toFixed(1)],
  ['after_reopen_over_warm', (r) => (afterRate(r) / warmRate(r)).toFixed(3)],
  ['list_ms', (r) => r.listMs.toFixed(1), 'listMs'],
  ['listed', (r) => r.listed, 'listed'],
  ['peak_anon_upload_bytes', (r) => r.peakUpload, 'peakUpload'],
  ['peak_anon_download_bytes', (r) => r.peakDownload, 'peakDownload'],
  ['peak_anon_reopen_bytes', (r) => r.peakReopen, 'peakReopen'],
  ['peak_anon_list_bytes', (r) => r.peakList, 'peakList'],
  ['peak_anon_bytes', (r) => r.peakAnon, 'peakAnon'],
  ['peak_rss_bytes', (r) => r.peakRss, 'peakRss'],
  ['peak_fds', (r) => r.peakFds, 'peakFds'],
  ['disk_bytes', (r) => r.disk, 'disk'],
  ['live_bytes', live],
  ['disk_over_live', (r) => (r.disk / live(r)).toFixed(3)]
]
const HEADER = COLUMNS.map(([name]) => name).join(',')

const toCsv = (rows) => [HEADER, ...rows.map((r) => COLUMNS.map(([, value]) => value(r)).join(','))].join('\n') + '\n'

function fromCsv (record) {
  const row = {}
  for (const [name, , field] of COLUMNS) if (field) row[field] = field === 'engine' ? record[name] : Number(record[name])
  return row
}

// What the report tables and the charts show: a figure of a row, its unit, which way is
// better; `ratio: false` for a figure that is a ratio to something else than one raw
// LevelDB's.
const ms = (x) => fmt(x, x < 10 ? 2 : 1)
const MEASURES = [
  { id: 'upload', title: 'Uploads over the segment since the last checkpoint', unit: 'pieces/s', better: 'higher', value: uploadRate },
  { id: 'reads', title: 'Random reads, warm, every byte checked', unit: 'reads/s', better: 'higher', value: warmRate },
  { id: 'after-reopen', title: 'Random reads after a close and open, the first alone', unit: 'reads/s', better: 'higher', value: afterRate },
  { id: 'after-reopen-warm', title: 'Reads after a close and open, over the warm rate', unit: 'x', better: 'higher', value: (r) => afterRate(r) / warmRate(r), show: (x) => fmt(x, 2), ratio: false },
  { id: 'close', title: 'Close', unit: 'ms', better: 'lower', value: (r) => r.closeMs, show: ms },
  { id: 'open', title: 'Open again', unit: 'ms', better: 'lower', value: (r) => r.openMs, show: ms },
  { id: 'first-read', title: 'The first read after the open', unit: 'ms', better: 'lower', value: (r) => r.firstMs, show: ms },
  { id: 'open-first-read', title: 'Open again, then the first read', unit: 'ms', better: 'lower', value: (r) => r.openMs + r.firstMs, show: ms },
  { id: 'list', title: 'Listing every piece, just opened', unit: 'ms', better: 'lower', value: (r) => r.listMs, show: ms },
  { id: 'memory', title: 'Peak private memory (RssAnon) over the checkpoint', unit: 'MiB', better: 'lower', value: (r) => mib(r.peakAnon) },
  ...PHASES.map((p) => ({ id: `memory-${p}`, title: `Peak private memory, ${p}`, unit: 'MiB', better: 'lower', value: (r) => mib(r[`peak${p[0].toUpperCase()}${p.slice(1)}`]) })),
  { id: 'rss', title: 'Peak RSS (private and file-backed)', unit: 'MiB', better: 'lower', value: (r) => mib(r.peakRss) },
  { id: 'disk', title: 'Disk (blocks allocated) over the live bytes', unit: 'x', better: 'lower', value: (r) => r.disk / live(r), show: (x) => fmt(x, 2) }
]
const showOf = (m) => m.show || ((x) => fmt(x))

// The rows' engines and checkpoints; at(engine, pieces): that row.
function grid (rows) {
  const engines = ENGINES.filter((e) => rows.some((r) => r.engine === e))
  const checkpoints = [...new Set(rows.map((r) => r.pieces))].sort((a, b) => a - b)
  const at = (engine, pieces) => rows.find((r) => r.engine === engine && r.pieces === pieces)
  return { engines, checkpoints, at }
}

// A measure's table: engines x checkpoints, each figure with its ratio to one raw
// LevelDB's at the same checkpoint.
function table (m, { engines, checkpoints, at }) {
  const lines = [`| engine | ${checkpoints.map((c) => fmt(c)).join(' | ')} |`, `|---|${checkpoints.map(() => '---').join('|')}|`]
  for (const e of engines) {
    const cells = checkpoints.map((c) => {
      const r = at(e, c)
      if (!r) return ''
      const base = at(BASE, c)
      const ratio = m.ratio !== false && e !== BASE && base ? ` (${fmt(m.value(r) / m.value(base), 2)}x)` : ''
      return `${showOf(m)(m.value(r))}${ratio}`
    })
    lines.push(`| ${NAMES[e]} | ${cells.join(' | ')} |`)
  }
  return lines
}

function report (args, rows, { loadStart, loadEnd, filesystem, commit }) {
  const g = grid(rows)
  const lines = []
  const add = (line = '') => lines.push(line)
  const load = (l) => l.map((x) => x.toFixed(2)).join(' ')
  add(`# A store grown to ${fmt(g.checkpoints.at(-1))} pieces of ${fmt(args.size)} bytes, ${args.workers} workers`)
  add()
  add(`Measured with \`node perf/grow.js ${process.argv.slice(2).join(' ')}\` at commit ${commit}, ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC, on ${machine()}; stores on ${filesystem}. Each engine in its own process, holding its store through the growth; at each checkpoint the engines took turns, the first rotated. kfs: a new store, memory budget ${fmt((args.memory ?? MEMORY) / MiB)} MiB${args.memory ? ' (--memory)' : ' (its default)'}. Reads: ${fmt(args.reads)} at each checkpoint (every piece when fewer are held); after each reopen, ${fmt(args.afterReopen)}. Load average (1, 5, 15 min) at the start: ${load(loadStart)}; at the end: ${load(loadEnd)}. One run: compare engines within it, as ratios, not with other runs.${args.quick ? ` **${quickMark('sizes')}.**` : ''}`)
  add()
  add('Method: perf/grow.js (the comment at its top) and doc/performance.md, "A store grown to a million pieces". Columns: the pieces held; in brackets, the ratio to one raw LevelDB at the same checkpoint.')
  add()
  for (const m of MEASURES) {
    add(`## ${m.title} (${m.unit}; ${m.better} is better)`)
    add()
    if (m.id === 'upload') lines.push(`(${fmt(1000 * args.size / MiB, 1)} MiB/s per 1,000 pieces/s; grow.csv has MiB/s.)`, '')
    lines.push(...table(m, g), '')
    lines.push(`![${m.title}](grow-${m.id}.svg)`, '')
  }
  return lines.join('\n')
}

// A line chart per measure: the figure against the pieces held, an engine a line.
function charts (rows, args) {
  const { engines } = grid(rows)
  const first = rows[0] || { size: 0, workers: 0 }
  const subtitle = [`pieces of ${fmt(first.size)} bytes, ${first.workers} workers; one run, each engine in its own process`, machineFor(args, args.dir)]
  const out = {}
  for (const m of MEASURES) {
    out[`grow-${m.id}.svg`] = lineChart({
      title: `${m.title} (${m.better} is better)`,
      subtitle,
      mark: args.quick ? quickMark('sizes') : undefined,
      xLabel: 'pieces held',
      yLabel: m.unit,
      xScale: 'log',
      series: engines.map((e) => ({ name: NAMES[e], points: rows.filter((r) => r.engine === e).map((r) => [r.pieces, m.value(r)]) }))
    })
  }
  return out
}

const REDRAW = { header: HEADER, fromCsv, charts }

async function main (args) {
  fs.mkdirSync(args.dir, { recursive: true })
  const base = fs.mkdtempSync(path.join(args.dir, 'kfs-grow-'))
  const context = { loadStart: os.loadavg(), filesystem: filesystemOf(base), commit: commitOf() }
  let results
  try {
    // Every engine holds its store at once: each the live bytes, and as much again for
    // LevelDB's compactions and the files' blocks, then some.
    const need = args.engines.length * args.checkpoints.at(-1) * args.size * 2 + 256 * MiB
    const { bavail, bsize } = fs.statfsSync(base)
    if (bavail * bsize < need) throw new Error(`${base} has ${fmt(bavail * bsize / MiB)} MiB free; this run needs about ${fmt(need / MiB)} MiB`)
    const job = (engine) => ({ name: 'grow', engine, dir: path.join(base, engine), size: args.size, checkpoints: [0, ...args.checkpoints], workers: args.workers, reads: args.reads, afterReopen: args.afterReopen, memory: args.memory })
    results = await runSteps(SELF, args.engines.map(job), args.checkpoints.length)
  } finally {
    fs.rmSync(base, { recursive: true, force: true })
  }
  context.loadEnd = os.loadavg()
  const rows = args.engines.flatMap((engine) => results[engine].map((r) => ({ engine, ...r })))
  const csv = toCsv(rows)
  const markdown = report(args, rows, context)
  const files = writeOut(args.out, { 'grow.csv': csv, 'grow.md': markdown, ...chartsOf(csv, args, REDRAW) })
  process.stdout.write(markdown + '\n')
  process.stderr.write(`perf/grow.js: wrote ${files.join(', ')} to ${args.out}\n`)
}

if (require.main === module) runScript(COMMAND, { cases: CASES, main, redraw: REDRAW })

module.exports = { HEADER, ENGINES, MEASURES }

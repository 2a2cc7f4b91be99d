'use strict'

// A storage node's piece workload, the shape of Storj's own piece-store benchmark
// (storj/storj, cmd/tools/piecestore-benchmark): pieces of 62,068 bytes (a piece of a
// 1.8 MB file after erasure coding), 10,000 of them, 5 workers; upload, download, then
// collect the expired pieces. Each engine runs each round in a child process of its
// own (LevelDB runs every compaction of a process on one thread), into a new store;
// rounds rotate the engines' order.
//
// --fresh: kfs starts from a new store, its shards made by the first pieces, on the
// clock (without it, they are made before). --from-csv FILE runs nothing: it draws the
// chart again from a pieces.csv, into --out.
//
// Phases, each timed whole (pieces/s, MiB/s) and piece by piece (p50, p99):
// - upload: the workers take the pieces in turn; each piece is random bytes (a slice of
//   a random pool at a random offset, so that no copy is made), stored under a random
//   32-byte piece ID in hex, as a storage node addresses pieces;
// - download: every piece, in a random order, the same number of workers, every byte
//   compared with what was written (the comparison is outside the piece's latency);
// - collect: every piece unlinked, one at a time, in upload order, as Storj's
//   collector deletes the expired pieces it finds; kfs-expire unlinks none: its pieces
//   were put with an expiry, and the store collects them itself once they are due.
// Disk use is the blocks allocated to the engine's directory (as `du` counts them):
// when the engine is open and empty, after each phase, then --idle later with the engine
// still open and idle, then once it is closed. From collect's start, the disk is also
// looked at every 50 ms until it is back to at most 10% of the pieces' bytes over the
// empty engine's (the issue's target for collecting expired pieces): the wall time to
// that, waited for up to --settle after the removals (one raw LevelDB and raw-kfs give
// no space back and are not waited for). Memory (RSS, and private: RssAnon) is
// sampled every 20 ms during each phase, open descriptors every 500 ms (listing kfs's
// thousand or so takes 0.5 ms of the main thread), both at its start and end too; a
// phase's figure is its peak. Garbage collection: the full collections (mark-compacts)
// of each phase, and the time all its collections took.
//
// Engines:
// - kfs: writeFile(pieceId, data), readFile, unlink, with every shard made before the
//   clock starts (a node's store in use), or with --fresh by the first pieces; kfs-sync
//   the same with { sync: true }; kfs-operator the same as kfs, while an operator runs
//   `kfs stat` of a piece and `kfs list` (all of it, to /dev/null) once a second beside
//   it, through the node's process (lib/share/): from the store's socket appearing to
//   the node's exit; kfs-expire the same as kfs, each piece put with an expiry an hour
//   after its upload (Storj's benchmark's TTL), and collected by the store: its collect
//   phase moves the process's clock (Date.now) an hour ahead, wakes the store's timer
//   with one more file put with an expiry in the past, and lasts until the store has
//   collected every piece (perf/harness/piece-engines.js);
// - files: one file per piece, Storj's old piece store: written to a temporary file,
//   then renamed to DIR/ab/cdef... (256 directories, made before the clock); files-fsync
//   the same with the file fsynced before its rename, as Storj's filestore does when it
//   syncs (Dir.Commit: file.Sync(), close, rename; the directory is not fsynced);
// - leveldb: one raw LevelDB (leveldown, kfs's LevelDB options), a piece per value:
//   put, get, del;
// - raw-kfs: the raw binding doing kfs's work, the floor of kfs through LevelDB: 256 raw
//   LevelDBs laid out and routed as kfs's shards, with their options, all made before
//   the clock, their memtables held to kfs's memory budget (--memory) by kfs's own
//   mechanism (lib/shard/memtables.js flushes them to tables as it flushes kfs's
//   shards), so that the floor holds no more in memory than kfs may; upload writes the
//   records kfs writes for the piece (its head record holding its data, metadata, the
//   shard's accounting), one batch; download gets the head record and checks its CRC32
//   as kfs does (a piece of more than one chunk: then its chunk records); collect gets
//   the metadata and writes kfs's unlink batch (metadata and head deleted, the dead
//   note, the accounting). No reclaiming.

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { spawn } = require('node:child_process')
const { now, msSince } = require('./harness/child')
const { cli, inFlight, runScript, writeOut, chartsOf, quickMark, machineFor, MACHINE_OPTION, MIN_N, fewNote, fmt, MiB } = require('./harness/script')
const { median, percentile } = require('./harness/stats')
const { barChart } = require('./harness/svg')
const { diskBytes } = require('./harness/usage')
const { machine, runRounds } = require('./harness/rounds')
const { KEEPS_SPACE, pieceSet, openEngine, sampler, gcCounter, shuffled } = require('./harness/piece-engines')
const { MEMORY } = require('../lib/api/memory')

const SELF = __filename
const ENGINES = ['kfs', 'kfs-expire', 'kfs-operator', 'kfs-sync', 'files', 'files-fsync', 'leveldb', 'raw-kfs']
const NAMES = {
  kfs: 'kfs',
  'kfs-expire': 'kfs, pieces expiring',
  'kfs-operator': 'kfs, an operator beside it',
  'kfs-sync': 'kfs, sync: true',
  files: 'files (temp file, rename)',
  'files-fsync': 'files + fsync',
  leveldb: 'one raw LevelDB',
  'raw-kfs': "raw LevelDBs doing kfs's work (floor)"
}
const PHASES = ['upload', 'download', 'collect']
const HEADER = 'round,engine,phase,pieces,piece_bytes,workers,seconds,pieces_per_s,mib_per_s,p50_ms,p99_ms,peak_rss_bytes,peak_anon_bytes,peak_fds,disk_empty_bytes,disk_end_bytes,disk_idle_bytes,disk_closed_bytes,gc_full,gc_ms,disk_back_s'

const COMMAND = cli(__filename, {
  run: 'npm run benchmark:pieces --',
  options: [
    { name: '--size', type: 'size', arg: 'BYTES', default: 62068, help: 'a piece\'s size: 62068, 256K, 1M' },
    { name: '--pieces', type: 'count', default: 10000, help: 'pieces per engine and round' },
    { name: '--workers', type: 'count', default: 5, help: 'uploads, and downloads, in flight' },
    { name: '--rounds', type: 'count', default: 3, help: 'rounds' },
    { name: '--idle', key: 'idleMs', type: 'count', arg: 'MS', default: 5000, help: 'how long the engine stays open, idle, after collect' },
    { name: '--settle', key: 'settleMs', type: 'count', arg: 'MS', default: 30000, help: 'how long after collect an engine that gives space back stays open at most, for its disk to be back to 10% of the pieces\' bytes over the empty engine\'s' },
    { name: '--fresh', type: 'flag', help: 'kfs starts from a new store: its shards are made by the first pieces, on the clock' },
    { name: '--memory', type: 'size', arg: 'BYTES', shown: '128M, kfs\'s default', help: 'kfs\'s memory budget (the `memory` option): 64M, 1G' },
    { name: '--engines', type: 'list', values: ENGINES, shown: 'all but kfs-operator', help: `the engines to run, comma-separated: ${ENGINES.join(', ')}` },
    { name: '--dir', type: 'string', arg: 'DIR', default: process.env.KFS_PERF_DIR || os.tmpdir(), shown: '$KFS_PERF_DIR, else the temp dir', help: 'where the stores go: a new directory made in it and removed at the end' },
    { name: '--quick', type: 'flag', sets: { size: 4096, pieces: 60, rounds: 1, idleMs: 200, settleMs: 2000, quick: true }, help: 'tiny sizes, for the tests: proves the script runs, measures nothing' },
    { name: '--from-csv', type: 'string', arg: 'FILE', help: 'run nothing: draw the chart again from a pieces.csv, into --out' },
    MACHINE_OPTION
  ],
  defaults: { quick: false },
  check (args) {
    if (args.engines) args.engines = ENGINES.filter((e) => args.engines.includes(e))
  }
})

// The disk is back once it holds no more than the empty engine's and this share of the
// live pieces' bytes (the issue's target for collecting them).
const BACK_SHARE = 0.1
const BACK_POLL_MS = 50

// Polls disk() every BACK_POLL_MS from now until it is at most `bytes`: reached resolves
// then; stop() ends the polling and gives the seconds from now to that poll, or
// undefined if it never came.
function diskBack (disk, bytes) {
  const start = now()
  let seconds
  let timer
  const reached = new Promise((resolve) => {
    const poll = () => {
      if (disk() > bytes) return
      seconds = msSince(start) / 1000
      clearInterval(timer)
      resolve()
    }
    timer = setInterval(poll, BACK_POLL_MS)
  })
  return { reached, stop: () => { clearInterval(timer); return seconds } }
}

// Resolves when `promise` does, or after `ms`, whichever comes first.
async function within (promise, ms) {
  let timer
  await Promise.race([promise, new Promise((resolve) => { timer = setTimeout(resolve, Math.max(0, ms)) })])
  clearTimeout(timer)
}

const CASES = {
  // One engine's round: a row per phase, without round and engine.
  async pieces ({ engine, dir, size, pieces, workers, idleMs, settleMs, fresh, memory }) {
    const { key, content } = pieceSet(size)
    const keys = Array.from({ length: pieces }, (_, i) => key(i))
    const disk = () => diskBytes(dir, { allocated: true })
    const store = await openEngine(engine, dir, fresh, memory)
    const empty = disk()
    const peaks = sampler()
    const gcs = gcCounter()
    const rows = []
    // Runs a phase: run() resolves to the latencies it timed, piece by piece (none for the
    // store's own collection).
    const phase = async (name, n, run) => {
      peaks.start()
      gcs.start()
      const start = now()
      const latencies = await run()
      const seconds = msSince(start) / 1000
      const gc = gcs.stop()
      const peak = peaks.stop()
      const [p50, p99] = latencies.length ? [percentile(latencies, 50), percentile(latencies, 99)] : []
      rows.push({ phase: name, pieces, size, workers: n, seconds, p50, p99, peak, gc, diskEmpty: empty, diskEnd: disk() })
    }
    // op(i) for every i of `order`, `n` at a time; op resolves to what it timed.
    const each = (order, n, op) => async () => {
      const latencies = []
      await inFlight(n, order, async (i) => latencies.push(await op(i)))
      return latencies
    }
    const timed = async (fn) => {
      const start = now()
      const result = await fn()
      return { ms: msSince(start), result }
    }
    const upload = Array.from({ length: pieces }, (_, i) => i)
    await phase('upload', workers, each(upload, workers, async (i) => (await timed(() => store.put(keys[i], content(i)))).ms))
    await phase('download', workers, each(shuffled(pieces), workers, async (i) => {
      const { ms, result } = await timed(() => store.get(keys[i]))
      if (!content(i).equals(result)) throw new Error(`${engine} returned other bytes for piece ${i}`)
      return ms
    }))
    const back = diskBack(disk, empty + pieces * size * BACK_SHARE)
    if (store.expireAll) await phase('collect', 0, async () => { await store.expireAll(); return [] })
    else await phase('collect', 1, each(upload, 1, async (i) => (await timed(() => store.del(keys[i]))).ms))
    const removed = now()
    await new Promise((resolve) => setTimeout(resolve, idleMs))
    rows.at(-1).diskIdle = disk()
    if (!KEEPS_SPACE.includes(engine)) await within(back.reached, settleMs - msSince(removed))
    rows.at(-1).backSeconds = back.stop()
    await store.close()
    rows.at(-1).diskClosed = disk()
    return rows
  }
}

const cell = (x, digits) => (x == null || Number.isNaN(x) ? '' : digits === undefined ? String(x) : x.toFixed(digits))

function toCsv (rows) {
  return [HEADER, ...rows.map((r) => [r.round, r.engine, r.phase, r.pieces, r.size, r.workers, cell(r.seconds, 3), cell(r.pieces / r.seconds, 1), cell(r.pieces * r.size / MiB / r.seconds, 2), cell(r.p50, 3), cell(r.p99, 3),
    r.peak.rss, r.peak.anon, r.peak.fds, r.diskEmpty, r.diskEnd, cell(r.diskIdle), cell(r.diskClosed), r.gc.full, cell(r.gc.ms, 1), cell(r.backSeconds, 3)].join(','))].join('\n') + '\n'
}

// A row as the report and chart read it, from a record of pieces.csv.
function fromCsv (r) {
  const number = (x) => (x === '' ? undefined : Number(x))
  return {
    round: Number(r.round),
    engine: r.engine,
    phase: r.phase,
    pieces: Number(r.pieces),
    size: Number(r.piece_bytes),
    workers: Number(r.workers),
    seconds: Number(r.seconds),
    p50: number(r.p50_ms), // none for the store's own collection
    p99: number(r.p99_ms),
    peak: { rss: Number(r.peak_rss_bytes), anon: Number(r.peak_anon_bytes), fds: Number(r.peak_fds) },
    diskEmpty: Number(r.disk_empty_bytes),
    diskEnd: Number(r.disk_end_bytes),
    diskIdle: number(r.disk_idle_bytes),
    diskClosed: number(r.disk_closed_bytes),
    gc: { full: number(r.gc_full), ms: number(r.gc_ms) }, // absent from CSVs made before
    backSeconds: number(r.disk_back_s ?? '')
  }
}

const rate = (r) => r.pieces / r.seconds

// Figures over rounds: at(engine, phase) -> that engine's rows of the phase, by round;
// mid(engine, phase, fn): the median of fn(row) over rounds; ratio(a, b, phase): the
// median of the rounds' pieces/s ratios, each of engines measured in the same round.
function summarize (rows) {
  const rounds = [...new Set(rows.map((r) => r.round))]
  const at = (engine, phase) => rounds.map((round) => rows.find((r) => r.round === round && r.engine === engine && r.phase === phase)).filter(Boolean)
  const mid = (engine, phase, fn) => {
    const xs = at(engine, phase).map(fn)
    return xs.length ? median(xs) : NaN
  }
  const range = (engine, phase, fn) => {
    const xs = at(engine, phase).map(fn)
    return xs.length ? [Math.min(...xs), Math.max(...xs)] : [NaN, NaN]
  }
  const ratio = (a, b, phase) => {
    const xs = rounds.map((round) => {
      const [x, y] = [a, b].map((e) => rows.find((r) => r.round === round && r.engine === e && r.phase === phase))
      return x && y ? rate(x) / rate(y) : NaN
    }).filter(Number.isFinite)
    return xs.length ? median(xs) : NaN
  }
  return { rounds, at, mid, range, ratio }
}

function report (args, rows, { loadStart, loadEnd, filesystem, commit }) {
  const { rounds, at, mid, ratio } = summarize(rows)
  const engines = ENGINES.filter((e) => rows.some((r) => r.engine === e))
  const lines = []
  const add = (line = '') => lines.push(line)
  const mib = (b) => fmt(b / MiB, 1)
  const ms = (x) => fmt(x, x < 10 ? 2 : 1)
  const load = (l) => l.map((x) => x.toFixed(2)).join(' ')
  const live = args.pieces * args.size
  add(`# Storj's piece workload: ${fmt(args.pieces)} pieces of ${fmt(args.size)} bytes, ${args.workers} workers`)
  add()
  add(`Measured with \`node perf/pieces.js ${process.argv.slice(2).join(' ')}\` at commit ${commit}, ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC, on ${machine()}; stores on ${filesystem}. ${rounds.length} round${rounds.length === 1 ? '' : 's'}, each engine in its own process and a new store each round, the engines' order rotated round by round. kfs's shards ${args.fresh ? 'were made by the first pieces, on the clock (--fresh: a new store)' : 'were all made before the clock started (a store in use)'}; its memory budget: ${fmt((args.memory ?? MEMORY) / MiB)} MiB${args.memory ? ' (--memory)' : ' (its default)'}. Figures are medians over rounds; a ratio is the median of the rounds' ratios, each of two engines measured in the same round. Load average (1, 5, 15 min) at the start: ${load(loadStart)}; at the end: ${load(loadEnd)}. The machine was shared with other work: compare engines within this run, not with other runs.${args.quick ? ` **${quickMark('sizes')}.**` : ''}`)
  add()
  add('Method: perf/pieces.js (the comment at its top) and doc/performance.md, "Storj\'s piece workload".')
  add()
  for (const phase of PHASES) {
    const workers = phase === 'collect' ? 1 : args.workers
    add(`## ${phase[0].toUpperCase()}${phase.slice(1)} (${workers} in flight)`)
    add()
    // The slowest and fastest rounds (the CSV has each): a list of every round would
    // not fit 100 columns.
    const spread = (e, fn) => {
      const values = at(e, phase).map(fn)
      const [low, high] = [Math.min(...values), Math.max(...values)].map((v) => fmt(v))
      return low === high ? low : `${low}-${high}`
    }
    add(`Pieces/s (higher is better): the median of the rounds, and the slowest and fastest round (${rounds.length < MIN_N ? fewNote(rounds.length) : `n = ${rounds.length}`}); latency of a piece, and the process's garbage collection (full: mark-compacts; ms: all collections), medians of the rounds:`)
    add()
    add('| engine | pieces/s | rounds | MiB/s | p50 ms | p99 ms | full GCs | GC ms |')
    add('|---|---|---|---|---|---|---|---|')
    for (const e of engines) {
      add(`| ${NAMES[e]} | ${fmt(mid(e, phase, rate))} | ${spread(e, rate)} | ${fmt(mid(e, phase, (r) => rate(r) * r.size / MiB), 1)} | ${ms(mid(e, phase, (r) => r.p50))} | ${ms(mid(e, phase, (r) => r.p99))} | ${fmt(mid(e, phase, (r) => r.gc.full))} | ${fmt(mid(e, phase, (r) => r.gc.ms))} |`)
    }
    add()
    const against = ['files', 'files-fsync', ...(phase === 'download' ? ['raw-kfs', 'leveldb'] : [])]
    const short = { files: '/ files', 'files-fsync': '/ files + fsync', 'raw-kfs': '/ floor', leveldb: '/ one raw LevelDB' }
    add('Pieces/s over other engines\' (above 1: faster), and peaks: RSS, private memory, descriptors (lower is better):')
    add()
    add(`| engine | ${against.map((o) => short[o]).join(' | ')} | RSS MiB | private MiB | fds |`)
    add(`|---|${against.map(() => '---').join('|')}|---|---|---|`)
    for (const e of engines) {
      add(`| ${NAMES[e]} | ${against.map((o) => fmt(ratio(e, o, phase), 2)).join(' | ')} | ${fmt(mid(e, phase, (r) => r.peak.rss / MiB))} | ${fmt(mid(e, phase, (r) => r.peak.anon / MiB))} | ${fmt(mid(e, phase, (r) => r.peak.fds))} |`)
    }
    add()
    if (phase === 'collect' && engines.includes('kfs-expire')) {
      add(`"${NAMES['kfs-expire']}": no call per piece; the phase lasts from the moment every piece has expired until the store has collected them all (its pieces/s), so it has no latency per piece.`)
      add()
    }
    if (phase === 'download') {
      add(`The floor ("${NAMES['raw-kfs']}") is the least kfs can do through LevelDB (leveldown ${require('leveldown/package.json').version}): the raw binding doing kfs's work, on 256 LevelDBs laid out, configured and routed as kfs's shards. A download is a get of the head record, its CRC32 checked on the main thread as kfs checks it (one get: the head holds a piece of one chunk); upload and collect write kfs's batches (perf/pieces.js). "/ floor" is what kfs's own code costs over that; the floor's "/ one raw LevelDB", what kfs's records and shards cost.`)
      add()
    }
  }
  if (engines.includes('kfs-operator') && engines.includes('kfs')) {
    add(`## ${NAMES['kfs-operator']}: pieces/s over kfs's alone`)
    add()
    add('| phase | ratio (rounds) |')
    add('|---|---|')
    for (const phase of PHASES) add(`| ${phase} | ${fmt(ratio('kfs-operator', 'kfs', phase), 2)} |`)
    add()
  }
  add(`## Disk: blocks allocated, over the ${mib(live)} MiB of live pieces stored before collect`)
  add()
  const idle = `${fmt(args.idleMs / 1000, 1)} s`
  const share = (e, phase, fn) => `${fmt(100 * mid(e, phase, fn) / live, 1)}%`
  const disk = [
    [['empty, open MiB', (e) => mib(mid(e, 'upload', (r) => r.diskEmpty))], ['after download', (e) => share(e, 'download', (r) => r.diskEnd)], ['after collect', (e) => share(e, 'collect', (r) => r.diskEnd)], [`${idle} later, open`, (e) => share(e, 'collect', (r) => r.diskIdle)]],
    [[`${idle} later, less empty`, (e) => share(e, 'collect', (r) => r.diskIdle - r.diskEmpty)], ['after close', (e) => share(e, 'collect', (r) => r.diskClosed)], ['after close, MiB', (e) => mib(mid(e, 'collect', (r) => r.diskClosed))]]
  ]
  for (const columns of disk) {
    add(`| engine | ${columns.map(([name]) => name).join(' | ')} |`)
    add(`|---|${columns.map(() => '---').join('|')}|`)
    for (const e of engines) add(`| ${NAMES[e]} | ${columns.map(([, value]) => value(e)).join(' | ')} |`)
    add()
  }
  add(`Shares of the live bytes. "empty, open": the engine's directory once it is open and before the first piece (kfs: ${args.fresh ? 'no shard made yet' : 'every shard made, each holding one tiny file'}; files: the 256 directories); "less empty": what collect left beyond that.`)
  add()
  reportBack(args, rows, add)
  add('![pieces/s per engine and phase](pieces.svg)')
  add('![kfs against the other engines](pieces-ratio.svg)')
  add()
  return lines.join('\n')
}

// Collect's wall time until the disk is back (diskBack), per engine that gives space
// back, and kfs unlinking over kfs collecting by expiry, the issue's target.
function reportBack (args, rows, add) {
  const { rounds, at, mid } = summarize(rows)
  const engines = ENGINES.filter((e) => !KEEPS_SPACE.includes(e) && at(e, 'collect').length)
  if (!engines.length) return
  const s = (x) => fmt(x, 2)
  add(`## Collect: wall time until the disk is back to ${100 * BACK_SHARE}% of the live bytes`)
  add()
  add(`Seconds from collect's start (${NAMES['kfs-expire']}: the moment every piece has expired) to the first look, every ${BACK_POLL_MS} ms, that found the engine's disk at most ${100 * BACK_SHARE}% of the live pieces' bytes over the empty engine's; medians of the rounds, then each round's ("–": not within ${fmt(args.settleMs / 1000)} s of the removals, --settle). One raw LevelDB and the floor give no space back and are not waited for.`)
  add()
  add('| engine | removals, s | disk back, s | each round |')
  add('|---|---|---|---|')
  for (const e of engines) {
    const backs = at(e, 'collect').map((r) => r.backSeconds)
    add(`| ${NAMES[e]} | ${s(mid(e, 'collect', (r) => r.seconds))} | ${backs.includes(undefined) ? '–' : s(median(backs))} | ${backs.map(s).join(', ')} |`)
  }
  add()
  const ratios = rounds.map((round) => {
    const [unlinked, expired] = ['kfs', 'kfs-expire'].map((e) => rows.find((r) => r.round === round && r.engine === e && r.phase === 'collect'))
    return unlinked && expired ? unlinked.backSeconds / expired.backSeconds : NaN
  })
  if (engines.includes('kfs') && engines.includes('kfs-expire')) {
    const figure = ratios.every(Number.isFinite) ? fmt(median(ratios), 2) : '–'
    add(`kfs unlinking the pieces one by one over kfs collecting them by expiry, wall time to the disk back: ${figure} (rounds: ${ratios.map((x) => fmt(x, 2)).join(', ')}); the target is at least 10.`)
    add()
  }
}

// Median pieces/s per phase and engine, whiskers from the slowest round to the fastest,
// from the CSV's rows (chartsOf): log scale, as collect runs an order of magnitude
// faster than upload. Then kfs's pieces/s over each other engine's, per phase, 1.0
// marked (the median of the rounds' ratios).
function charts (rows, args) {
  const { rounds, at, mid, ratio } = summarize(rows)
  const engines = ENGINES.filter((e) => rows.some((r) => r.engine === e))
  const first = rows[0] || { pieces: 0, size: 0, workers: 0 }
  const n = `n = ${rounds.length} round${rounds.length === 1 ? '' : 's'}`
  const machine = machineFor(args, args.dir)
  const mark = args.quick ? quickMark('sizes') : undefined
  const workload = `${fmt(first.pieces)} pieces of ${fmt(first.size)} bytes, ${first.workers} workers (collect: 1)`
  const out = {}
  out['pieces.svg'] = barChart({
    title: 'Storj\'s piece workload: pieces/s (higher is better)',
    subtitle: [`${workload}; median of ${n}`, machine],
    legendNote: ['whiskers: slowest and', 'fastest round'],
    mark,
    xLabel: 'phase',
    yLabel: 'pieces/s',
    yScale: 'log',
    groups: PHASES,
    series: engines.map((e) => ({
      name: NAMES[e],
      values: PHASES.map((p) => mid(e, p, rate)),
      errors: PHASES.map((p) => {
        const xs = at(e, p).map(rate)
        return xs.length > 1 ? [Math.min(...xs), Math.max(...xs)] : []
      })
    }))
  })
  const kfs = engines.find((e) => e === 'kfs') || engines.find((e) => e.startsWith('kfs'))
  const others = engines.filter((e) => !e.startsWith('kfs'))
  if (kfs && others.length) {
    out['pieces-ratio.svg'] = barChart({
      title: `${NAMES[kfs]}: pieces/s over each other engine's (higher is better for kfs)`,
      subtitle: [`above 1.0 kfs is faster; median of the ratios of ${n}, engines measured in the same round`, machine],
      mark,
      xLabel: 'phase',
      yLabel: `${kfs} / other`,
      yScale: 'log',
      reference: 1,
      referenceLabel: '1.0: as fast',
      groups: PHASES,
      series: others.map((e) => ({ name: `${kfs} / ${NAMES[e]}`, values: PHASES.map((p) => ratio(kfs, e, p)) }))
    })
  }
  return out
}

// An operator beside the node at `dir` (kfs-operator): once the store's socket is
// there, `kfs stat` of a piece and `kfs list` every second, one after the other, until
// stop(). A stat or list that fails while the node serves fails the run.
function operator (dir) {
  const socket = path.join(dir, 'kfs.sock')
  const cli = path.join(__dirname, '..', 'bin', 'kfs.js')
  let stopped = false
  let runs = 0
  const run = (args, stdio) => new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [cli, '-d', dir, ...args], { stdio: ['ignore', stdio, 'inherit'] })
    let out = ''
    if (stdio === 'pipe') child.stdout.on('data', (d) => { out += d })
    child.once('error', reject)
    child.once('exit', (code) => (code === 0 || stopped || !fs.existsSync(socket) ? resolve(out) : reject(new Error(`kfs ${args.join(' ')} beside the node exited with ${code}`))))
  })
  const loop = (async () => {
    while (!stopped && !fs.existsSync(socket)) await new Promise((resolve) => setTimeout(resolve, 100))
    let piece
    while (!stopped) {
      const start = now()
      const listed = await run(['list'], piece ? 'ignore' : 'pipe')
      piece = piece || listed.split('\n')[0].split('\t')[0]
      if (piece && !stopped) await run(['stat', piece], 'ignore').catch(() => {}) // the piece may be collected meanwhile
      runs++
      const left = 1000 - msSince(start)
      if (left > 0 && !stopped) await new Promise((resolve) => setTimeout(resolve, left))
    }
  })()
  return async () => {
    stopped = true
    await loop
    process.stderr.write(`perf/pieces.js: the operator ran kfs list and kfs stat ${runs} times\n`)
  }
}

const REDRAW = { header: HEADER, fromCsv, charts }

async function main (args) {
  const out = args.out
  const { rows, context } = await runRounds({
    script: SELF,
    name: 'pieces',
    engines: args.engines ?? ENGINES.filter((e) => e !== 'kfs-operator'),
    rounds: args.rounds,
    dir: args.dir,
    need: args.pieces * args.size * 2 + 256 * MiB,
    beside: (engine, dir) => (engine === 'kfs-operator' ? operator(dir) : undefined),
    job: (engine, dir) => ({ name: 'pieces', engine, dir, size: args.size, pieces: args.pieces, workers: args.workers, idleMs: args.idleMs, settleMs: args.settleMs, fresh: args.fresh, memory: args.memory })
  })
  const csv = toCsv(rows)
  const markdown = report(args, rows, context)
  writeOut(out, { 'pieces.csv': csv, 'pieces.md': markdown, ...chartsOf(csv, args, REDRAW) })
  process.stdout.write(markdown + '\n')
  process.stderr.write(`perf/pieces.js: wrote pieces.csv, pieces.md, pieces.svg and pieces-ratio.svg to ${out}\n`)
}

if (require.main === module) runScript(COMMAND, { cases: CASES, main, redraw: REDRAW })

module.exports = { HEADER, ENGINES, PHASES }

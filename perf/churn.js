'use strict'

// A storage node's steady state, Storj's piece shape (perf/pieces.js): pieces of 62,068
// bytes; first 10,000 of them uploaded, then for a fixed time 5 workers upload new
// pieces, each worker unlinking the oldest piece after each upload, so that 10,000
// stay live and kfs's reclaimer (lib/maintenance/reclaimer.js) runs alongside the
// uploads. Engines: kfs as it is (reclaim: true, the default) and kfs with
// { reclaim: false }, each round in a child process of its own, into a new store whose
// shards are all made before the clock starts; rounds rotate the engines' order.
//
// The churn: each worker uploads a new piece (random bytes, a random 32-byte ID in hex,
// as perf/pieces.js makes them), then unlinks the oldest one, until the time is up.
// Figures: upload pieces/s over the churn, p50 and p99 of a piece's upload, the
// unlinks; disk (blocks allocated, as `du` counts them) over the live bytes
// (--pieces x --size) after the preload, at the churn's end, and --idle later with the
// engine still open.
//
// --expire: pieces expire instead of being unlinked, as a storage node's do. Each piece,
// the preload's too, is put with an expiry --ttl after its upload, and nothing is
// unlinked: about --ttl's worth of uploads stays live. Engines: kfs-expire, whose store
// collects the expired pieces itself (lib/maintenance/expiry.js) and reclaims their space
// (the defaults), against kfs-no-collect, the same uploads with each expiry an hour later:
// nothing falls due during the run, nothing is collected, and the store grows. Figures:
// uploads as above; the pieces collected (metrics().expiries.files); the live pieces
// (expiry still ahead) and the disk over their bytes after the preload and at the
// churn's end; the disk over the empty store's --idle later.

const os = require('node:os')
const crypto = require('node:crypto')
const { now, msSince } = require('./harness/child')
const { cli, inFlight, runScript, writeOut, quickMark, fmt, MiB } = require('./harness/script')
const { median, percentile } = require('./harness/stats')
const { diskBytes } = require('./harness/usage')
const { openStore } = require('./harness/kfs-work')
const { machine, runRounds } = require('./harness/rounds')

const SELF = __filename
// Each mode's engines: the one measured, then the one it is compared with.
const MODES = { unlink: ['kfs', 'kfs-no-reclaim'], expire: ['kfs-expire', 'kfs-no-collect'] }
const ENGINES = Object.values(MODES).flat()
const NAMES = {
  kfs: 'kfs (reclaim: true, the default)',
  'kfs-no-reclaim': 'kfs, reclaim: false',
  'kfs-expire': 'kfs, pieces expiring, collected',
  'kfs-no-collect': 'kfs, nothing due (expiry 1 h on)'
}
const HEADER = 'round,engine,pieces,piece_bytes,workers,seconds,uploaded,upload_pieces_per_s,p50_ms,p99_ms,collected,disk_empty_bytes,live_preload_bytes,disk_preload_bytes,live_end_bytes,disk_end_bytes,disk_idle_bytes'
// --expire: kfs-no-collect's pieces expire this long after kfs-expire's would.
const LATER_MS = 60 * 60 * 1000
// A piece is a slice of a random pool at a random offset up to this.
const POOL_SLACK = 4 * MiB

const COMMAND = cli(__filename, {
  run: 'npm run benchmark:churn --',
  options: [
    { name: '--size', type: 'size', arg: 'BYTES', default: 62068, help: 'a piece\'s size' },
    { name: '--pieces', type: 'count', default: 10000, help: 'live pieces: uploaded first, then kept by the unlinks' },
    { name: '--workers', type: 'count', default: 5, help: 'uploads in flight during the churn' },
    { name: '--seconds', type: 'count', arg: 'S', default: 40, help: 'how long the uploaders go on' },
    { name: '--rounds', type: 'count', default: 3, help: 'rounds' },
    { name: '--idle', key: 'idleMs', type: 'count', arg: 'MS', default: 5000, help: 'how long the engine stays open, idle, after the churn' },
    { name: '--expire', type: 'flag', help: 'pieces expire --ttl after their upload instead of being unlinked: kfs collecting them, against kfs with nothing due' },
    { name: '--ttl', type: 'count', arg: 'S', default: 5, help: 'with --expire: seconds from a piece\'s upload to its expiry' },
    { name: '--dir', type: 'string', arg: 'DIR', default: process.env.KFS_PERF_DIR || os.tmpdir(), shown: '$KFS_PERF_DIR, else the temp dir', help: 'where the stores go: a new directory made in it and removed at the end' },
    { name: '--quick', type: 'flag', sets: { size: 4096, pieces: 100, seconds: 2, ttl: 1, rounds: 1, idleMs: 200, quick: true }, help: 'tiny sizes, for the tests: proves the script runs, measures nothing' }
  ],
  defaults: { quick: false, expire: false }
})

const CASES = {
  // One engine's round: its row, without round and engine.
  async churn ({ engine, dir, size, pieces, workers, seconds, idleMs, ttl }) {
    const pool = crypto.randomBytes(size + POOL_SLACK)
    const piece = () => {
      const at = crypto.randomInt(POOL_SLACK + 1)
      return { key: crypto.randomBytes(32).toString('hex'), data: pool.subarray(at, at + size) }
    }
    const disk = () => diskBytes(dir, { allocated: true })
    const expiring = engine === 'kfs-expire' || engine === 'kfs-no-collect'
    const store = await openStore(dir, undefined, undefined, { reclaim: engine !== 'kfs-no-reclaim' })
    await store.open()
    const diskEmpty = disk()
    const stored = [] // keys in the order their uploads ended; the oldest at `oldest`
    const expiries = [] // --expire: each upload's expiry, in the order the uploads began
    let oldest = 0
    const upload = async () => {
      const { key, data } = piece()
      let options
      if (expiring) {
        options = { expires: Date.now() + ttl * 1000 + (engine === 'kfs-no-collect' ? LATER_MS : 0) }
        expiries.push(options.expires)
      }
      await store.writeFile(key, data, options)
      stored.push(key)
    }
    // The live bytes at this moment: every piece, or (--expire) those whose expiry is ahead.
    const live = () => (expiring ? expiries.filter((time) => time > Date.now()).length : pieces) * size
    await inFlight(workers, Array.from({ length: pieces }), upload)
    const livePreload = live()
    const diskPreload = disk()

    // Each worker, once its piece is stored, unlinks the oldest: removals keep pace with
    // uploads, and about --pieces stay live throughout (a collector of its own falls
    // behind 5 uploaders, and live data then grows). --expire: nothing is unlinked.
    let collected = 0
    const latencies = []
    const start = now()
    await Promise.all(Array.from({ length: workers }, async () => {
      while (msSince(start) < seconds * 1000) {
        const began = now()
        await upload()
        latencies.push(msSince(began))
        if (expiring) continue
        await store.unlink(stored[oldest++])
        collected++
      }
    }))
    const elapsed = msSince(start) / 1000
    const liveEnd = live()
    const diskEnd = disk()
    if (expiring) collected = (await store.metrics()).expiries.files
    await new Promise((resolve) => setTimeout(resolve, idleMs))
    const diskIdle = disk()
    await store.close()
    return { pieces, size, workers, seconds: elapsed, uploaded: latencies.length, p50: percentile(latencies, 50), p99: percentile(latencies, 99), collected, diskEmpty, livePreload, diskPreload, liveEnd, diskEnd, diskIdle }
  }
}

const rate = (r) => r.uploaded / r.seconds

const cell = (x, digits) => (x === undefined ? '' : x.toFixed(digits))

function toCsv (rows) {
  return [HEADER, ...rows.map((r) => [r.round, r.engine, r.pieces, r.size, r.workers, r.seconds.toFixed(3), r.uploaded, rate(r).toFixed(1), cell(r.p50, 3), cell(r.p99, 3), r.collected, r.diskEmpty, r.livePreload, r.diskPreload, r.liveEnd, r.diskEnd, r.diskIdle].join(','))].join('\n') + '\n'
}

// The median over rounds of fn(row) for an engine; the rounds' ratios of the upload
// rate of the mode's measured engine to the one it is compared with, each pair measured
// in the same round.
function summarize (rows, engines) {
  const rounds = [...new Set(rows.map((r) => r.round))]
  const mid = (engine, fn) => median(rows.filter((r) => r.engine === engine).map(fn))
  const ratios = rounds.map((round) => {
    const [on, off] = engines.map((e) => rows.find((r) => r.round === round && r.engine === e))
    return rate(on) / rate(off)
  })
  return { rounds, mid, ratios }
}

function report (args, rows, { loadStart, loadEnd, filesystem, commit }) {
  const engines = MODES[args.expire ? 'expire' : 'unlink']
  const { rounds, mid, ratios } = summarize(rows, engines)
  const lines = []
  const add = (line = '') => lines.push(line)
  const load = (l) => l.map((x) => x.toFixed(2)).join(' ')
  const percent = (x) => `${fmt(100 * x, 1)}%`
  const ms = (x) => fmt(x, x < 10 ? 2 : 1)
  const removed = args.expire ? 'collected' : 'unlinked'
  add(args.expire
    ? `# Churn with expiry: pieces of ${fmt(args.size)} bytes expiring ${args.ttl} s after their upload, ${args.workers} workers uploading for ${args.seconds} s after ${fmt(args.pieces)}`
    : `# Churn: ${fmt(args.pieces)} live pieces of ${fmt(args.size)} bytes, ${args.workers} workers uploading and unlinking for ${args.seconds} s`)
  add()
  add(`Measured with \`node perf/churn.js ${process.argv.slice(2).join(' ')}\` at commit ${commit}, ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC, on ${machine()}; stores on ${filesystem}. ${rounds.length} round${rounds.length === 1 ? '' : 's'}, each engine in its own process and a new store each round, the engines' order rotated round by round. Figures are medians over rounds. Load average (1, 5, 15 min) at the start: ${load(loadStart)}; at the end: ${load(loadEnd)}.${args.quick ? ` **${quickMark('sizes')}.**` : ''}`)
  add()
  add('Method: perf/churn.js (the comment at its top) and doc/performance.md, "Storj\'s piece workload".')
  add()
  add('Uploads (pieces/s: higher is better; the median of the rounds, then each round\'s):')
  add()
  add(`| engine | pieces/s | each round | p50 ms | p99 ms | uploaded | ${removed} |`)
  add('|---|---|---|---|---|---|---|')
  for (const e of engines) {
    const of = rows.filter((r) => r.engine === e).map(rate)
    add(`| ${NAMES[e]} | ${fmt(mid(e, rate))} | ${of.map((x) => fmt(x)).join(', ')} | ${ms(mid(e, (r) => r.p50))} | ${ms(mid(e, (r) => r.p99))} | ${fmt(mid(e, (r) => r.uploaded))} | ${fmt(mid(e, (r) => r.collected))} |`)
  }
  add()
  add('Disk (lower is better):')
  add()
  const idle = `${fmt(args.idleMs / 1000, 1)} s later`
  if (args.expire) {
    const pieces = (bytes) => fmt(bytes / args.size)
    add(`| engine | live, preload | disk / live | live at the end | disk / live | ${idle}, over empty |`)
    add('|---|---|---|---|---|---|')
    for (const e of engines) add(`| ${NAMES[e]} | ${pieces(mid(e, (r) => r.livePreload))} | ${percent(mid(e, (r) => r.diskPreload / r.livePreload))} | ${pieces(mid(e, (r) => r.liveEnd))} | ${percent(mid(e, (r) => r.diskEnd / r.liveEnd))} | ${fmt(mid(e, (r) => (r.diskIdle - r.diskEmpty) / MiB), 1)} MiB |`)
    add()
    add('Live: the pieces whose expiry was still ahead (a count); disk / live: blocks allocated to the store\'s directory over their bytes; the last column: the blocks over the empty store\'s, in MiB.')
  } else {
    add(`| engine | after the preload | at the churn's end | ${idle} |`)
    add('|---|---|---|---|')
    for (const e of engines) add(`| ${NAMES[e]} | ${percent(mid(e, (r) => r.diskPreload / r.livePreload))} | ${percent(mid(e, (r) => r.diskEnd / r.liveEnd))} | ${percent(mid(e, (r) => r.diskIdle / r.liveEnd))} |`)
    add()
    add('Disk: blocks allocated to the store\'s directory over the live pieces\' bytes.')
  }
  add()
  add(`Upload pieces/s with ${args.expire ? 'collection' : 'reclaiming'} / without: ${fmt(median(ratios), 2)} (median; rounds: ${ratios.map((x) => fmt(x, 2)).join(', ')}).`)
  add()
  return lines.join('\n')
}

async function main (args) {
  const out = args.out
  const { rows, context } = await runRounds({
    script: SELF,
    name: 'churn',
    engines: MODES[args.expire ? 'expire' : 'unlink'],
    rounds: args.rounds,
    dir: args.dir,
    // Live pieces, up to ~256 MiB of dead ones before reclaiming starts, headroom;
    // --expire: kfs-no-collect keeps every upload (up to about 150 MiB/s here).
    need: args.pieces * args.size * 2 + 512 * MiB + (args.expire ? args.seconds * 150 * MiB : 0),
    job: (engine, dir) => ({ name: 'churn', engine, dir, size: args.size, pieces: args.pieces, workers: args.workers, seconds: args.seconds, idleMs: args.idleMs, ttl: args.ttl })
  })
  const markdown = report(args, rows, context)
  writeOut(out, { 'churn.csv': toCsv(rows), 'churn.md': markdown })
  process.stdout.write(markdown + '\n')
  process.stderr.write(`perf/churn.js: wrote churn.csv and churn.md to ${out}\n`)
}

if (require.main === module) runScript(COMMAND, { cases: CASES, main })

module.exports = { HEADER, ENGINES, MODES }

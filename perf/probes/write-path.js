'use strict'

// The write path against raw LevelDB doing the same writes: 8 MiB writeFile
// and 1 KiB files one at a time, into a store whose 256 shards exist, against leveldown
// writing the very records kfs writes (lib/shard/chunk-record.js, records.js), made
// before the clock starts, batch for batch, into 256 databases with kfs's shard settings.
//
// Each engine runs in a process of its own (LevelDB runs every flush and compaction of
// a process on one background thread), kept alive for the whole case: the parent asks
// the engines in turn for one step each (one 8 MiB file, or `step` small files),
// rotating who goes first, so that the load of a shared machine falls on all of them
// alike. Each step's ratio compares steps measured next to each other in time; the
// report gives the median and the spread of those ratios.
//
// Engines: kfs (writeFile); raw256 (256 leveldown databases; an 8 MiB file is 1 MiB
// batches of kfs's chunk records (8 chunks a batch), the first with the pending
// record and awaited, then at most two in flight, then the commit batch of metadata,
// pending delete and accounting; a small file is one batch of chunk, metadata and
// accounting); raw256c (the same records, one chunk per batch and at most four in
// flight, as kfs sends them: the fastest way found for raw leveldown); base (with
// --base: the kfs of another checkout, its root directory, to measure a change before
// and after side by side).
//
// first: a new store's first `--first` files of 1 KiB, in steps of 100, against 256 raw
// leveldown databases each created (createIfMissing) when its first file comes, then
// written as above: what making a database on first use costs LevelDB itself.

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const crypto = require('node:crypto')
const { runSteps, now, msSince } = require('../harness/child')
const { randomKey: key, writeRecords, rawShards, openStore } = require('../harness/kfs-work')
const { cli, runScript } = require('../harness/script')

const MiB = 1024 * 1024

const COMMAND = cli(__filename, {
  options: [
    { name: '--big', type: 'count', default: 20, help: 'steps of one 8 MiB file' },
    { name: '--small', type: 'count', default: 6000, help: '1 KiB files, in steps of --step' },
    { name: '--step', type: 'count', default: 300, help: 'small files per step' },
    { name: '--first', type: 'count', default: 1000, help: 'a new store\'s first files of 1 KiB, in steps of 100' },
    { name: '--dir', type: 'string', arg: 'DIR', default: process.env.KFS_PERF_DIR || os.tmpdir(), shown: '$KFS_PERF_DIR, else the temp dir', help: 'where the data goes' },
    { name: '--base', type: 'path', arg: 'DIR', help: 'the kfs of another checkout, its root directory, measured side by side' },
    { name: '--only', type: 'list', values: ['big', 'small', 'first'], default: ['big', 'small', 'first'], help: 'the cases to run' }
  ]
})
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b)
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2
}

// In the child (perf/harness/child.js, Stepped): makes the engine; each step writes `perStep`
// files and gives its ms.
async function makeEngine ({ kind, dir, lib, size, perStep, perBatch, inFlight, fresh }) {
  const value = crypto.randomBytes(size)
  let write, close
  if (kind === 'kfs') {
    const store = fresh ? require(lib || '../..')(dir) : await openStore(dir, 256, lib)
    await store.open()
    write = (k) => store.writeFile(k, value)
    close = () => store.close()
  } else {
    const raw = await rawShards(dir, 256, { lazy: fresh, perBatch })
    // The records of the next step are made before its clock starts: LevelDB's part alone.
    let next
    write = async (k) => {
      const { shard, file } = next.get(k)
      await writeRecords(await raw.open(shard), file, inFlight)
    }
    write.prepare = (keys) => { next = new Map(keys.map((k) => [k, raw.route(k, value)])) }
    close = raw.close
  }
  const step = async () => {
    const keys = Array.from({ length: perStep }, key)
    if (write.prepare) write.prepare(keys)
    const start = now()
    for (const k of keys) await write(k)
    return msSince(start)
  }
  return { step, close }
}

// Runs `steps` steps of each engine, in turn; returns { engine: [ms per step] }.
function runCase (root, names, { size, perStep, steps, base, fresh = false }) {
  const jobs = names.map((name) => {
    const lib = name === 'base' ? base : undefined
    const raw = { raw256: { perBatch: 8, inFlight: 2 }, raw256c: { perBatch: 1, inFlight: 4 } }[name]
    return { name: 'engine', engine: name, kind: raw ? 'raw' : 'kfs', ...raw, lib, dir: path.join(root, `${size}-${fresh}-${name}`), size, perStep, fresh }
  })
  return runSteps(__filename, jobs, steps)
}

function report (title, unit, times, per, names) {
  const f = (x, d = 1) => x.toFixed(d)
  const value = (n) => times[n].map((ms) => ms * per)
  const ratios = (a, b) => times[a].map((t, i) => t / times[b][i])
  const spread = (xs) => `${f(median(xs), 2)} (${f(Math.min(...xs), 2)}-${f(Math.max(...xs), 2)})`
  console.log(`\n${title}`)
  console.log(`| engine | ${unit}, median of steps | min-max |`)
  console.log('|---|---|---|')
  for (const n of names) console.log(`| ${n} | ${f(median(value(n)))} | ${f(Math.min(...value(n)))}-${f(Math.max(...value(n)))} |`)
  console.log(`kfs / raw256, per step: ${spread(ratios('kfs', 'raw256'))}`)
  if (names.includes('raw256c')) console.log(`kfs / raw256c, per step: ${spread(ratios('kfs', 'raw256c'))}`)
  if (names.includes('base')) console.log(`kfs / base, per step: ${spread(ratios('kfs', 'base'))}; base / raw256: ${spread(ratios('base', 'raw256'))}`)
}

async function main (args) {
  fs.mkdirSync(args.dir, { recursive: true })
  const root = fs.mkdtempSync(path.join(args.dir, 'kfs-write-path-'))
  const names = ['kfs', 'raw256', ...(args.base ? ['base'] : [])]
  try {
    console.log(`# perf/probes/write-path.js: 256 shards created first; each engine in its own process, steps interleaved${args.base ? `; base: ${args.base}` : ''}`)
    if (args.only.includes('big')) {
      const bigNames = [...names, 'raw256c']
      const times = await runCase(root, bigNames, { size: 8 * MiB, perStep: 1, steps: args.big, base: args.base })
      report(`8 MiB writeFile, ${args.big} steps of one file (target: kfs within 1.1x raw256)`, 'ms per file', times, 1, bigNames)
    }
    if (args.only.includes('small')) {
      const steps = Math.max(1, Math.round(args.small / args.step))
      const times = await runCase(root, names, { size: 1024, perStep: args.step, steps, base: args.base })
      report(`1 KiB files one at a time, awaited, ${steps} steps of ${args.step} (target: kfs within 1.3x raw256)`, 'us per file', times, 1000 / args.step, names)
    }
    if (args.only.includes('first')) {
      const steps = Math.max(1, Math.round(args.first / 100))
      const times = await runCase(root, names, { size: 1024, perStep: 100, steps, base: args.base, fresh: true })
      const total = (n) => times[n].reduce((a, b) => a + b, 0)
      console.log(`\nA new store's first ${steps * 100} files of 1 KiB, one at a time, awaited, in steps of 100 (target: kfs under 1 s)`)
      console.log('| engine | s in all |')
      console.log('|---|---|')
      for (const n of names) console.log(`| ${n} | ${(total(n) / 1000).toFixed(2)} |`)
      console.log(`kfs / raw256 (databases made on first use): ${(total('kfs') / total('raw256')).toFixed(2)}`)
      if (args.base) console.log(`kfs / base: ${(total('kfs') / total('base')).toFixed(2)}`)
    }
  } finally {
    fs.rmSync(root, { recursive: true, force: true })
  }
}

runScript(COMMAND, { cases: { engine: makeEngine }, main, tee: true })

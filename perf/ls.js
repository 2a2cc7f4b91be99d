'use strict'

// `ls`-style listing timings, in the shape of LeoFS's reported ones: kfs and vanilla
// (kfs with shardCount 1), each engine in its own child process.
//
// --from-csv FILE runs nothing: it draws the chart again from an ls.csv written before,
// into --out; add --quick for a quick run's CSV, so that its chart says so.
//
// The cases, with files of 1 KiB:
// - a store grown to 500, 1,000, 2,000, 5,000, 10,000, 20,000 and 100,000 files, listed
//   whole at each size (how time grows with what is listed);
// - at 11,000 files, one shard listed (for vanilla, its one shard is the whole store);
// - a store whose shard S holds 10,000 files, its shard S listed alone, then again once
//   the other shards hold 100,000 more (vanilla: all files are in its one shard).
// Each listing is timed twice: the library's list() on a store object just made (its
// shards closed, the page cache warm, nothing left to write back), and
// `kfs list > /dev/null` as a process.

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const crypto = require('node:crypto')
const { execFileSync } = require('node:child_process')
const async = require('async')
const { inChild, cliList, now, msSince } = require('./harness/child')
const { cli, runScript, writeOut, chartsOf, quickMark, machineOf, machineFor, MACHINE_OPTION, MIN_N, fewNote, fmt } = require('./harness/script')
const { lineChart, barChart } = require('./harness/svg')
const { shardFor } = require('../lib/shard/routing')
const { median } = require('./harness/stats')

const SELF = __filename
const ENGINES = { kfs: {}, vanilla: { shardCount: 1 } }
const HEADER = 'engine,case,store_files,listed,shard,run,list_ms,cli_ms'
const REF = '00112233445566778899aabbccddeeff00112233' // so that keys can be picked for a shard
const shardOf = (key, shardCount) => shardFor(Buffer.from(REF, 'hex'), key, shardCount)
const WRITERS = 16 // files stored at once while a store is built (not timed)

const QUICK = { runs: 2, steps: [50, 100, 110, 200], oneShardAt: 110, shardFiles: 40, others: 200, quick: true }
const COMMAND = cli(__filename, {
  run: 'npm run benchmark:ls --',
  options: [
    { name: '--runs', type: 'count', default: 5, help: 'timings of each listing' },
    { name: '--dir', type: 'string', arg: 'DIR', default: process.env.KFS_PERF_DIR || os.tmpdir(), shown: '$KFS_PERF_DIR, else the temp dir', help: 'where the stores live' },
    { name: '--quick', type: 'flag', sets: QUICK, help: 'tiny stores, for CI: proves the script runs, measures nothing' },
    { name: '--from-csv', type: 'string', arg: 'FILE', help: 'run nothing: draw the chart again from an ls.csv, into --out' },
    MACHINE_OPTION
  ],
  defaults: { steps: [500, 1000, 2000, 5000, 10000, 11000, 20000, 100000], oneShardAt: 11000, shardFiles: 10000, others: 100000, quick: false }
})

const randomKey = () => crypto.randomBytes(20).toString('hex')

// `count` keys that route to `shard` (or, with avoid, to any other shard).
function keysFor (count, shard, shardCount, { avoid = false } = {}) {
  const keys = []
  while (keys.length < count) {
    const key = randomKey()
    if ((shardOf(key, shardCount) === shard) !== avoid) keys.push(key)
  }
  return keys
}

const CASES = {
  // One engine's cases; returns rows without the engine name.
  async listings ({ engine, dir, runs, steps, oneShardAt, shardFiles, others }) {
    const kfs = require('..')
    const options = { referenceId: REF, ...ENGINES[engine] }
    const value = crypto.randomBytes(1024)
    const rows = []
    const add = async (store, keys) => {
      await async.eachLimit(keys, WRITERS, async (key) => store.writeFile(key, value))
    }
    // Times `runs` listings of the store at `location`, whole or one shard, once the
    // system wrote out what building the store left in the page cache.
    const time = async (location, kase, storeFiles, shard) => {
      for (let run = 1; run <= runs; run++) {
        execFileSync('sync') // each listing's shard opens write manifests and logs too
        const start = now()
        const store = kfs(location, options)
        let listed = 0
        for await (const entry of store.list(shard)) if (entry) listed++
        const listMs = msSince(start)
        await store.close()
        rows.push({ case: kase, storeFiles, listed, shard: shard === undefined ? '' : shard, run, listMs, cliMs: cliList(location, shard) })
      }
    }

    const grown = path.join(dir, 'grown')
    let store = kfs(grown, options)
    let stored = 0
    let firstKey
    for (const step of steps) {
      const keys = Array.from({ length: step - stored }, randomKey)
      firstKey = firstKey || keys[0]
      await add(store, keys)
      stored = step
      await store.close() // listings open the store afresh, with its shards closed
      if (step !== oneShardAt) await time(grown, 'store', step)
      else await time(grown, 'one-shard', step, shardOf(firstKey, store.shardCount)) // holding about 1/256 of the files
      store = kfs(grown, options)
    }
    await store.close()
    fs.rmSync(grown, { recursive: true, force: true })

    const beside = path.join(dir, 'beside')
    store = kfs(beside, options)
    await store.open()
    const shard = shardOf(randomKey(), store.shardCount)
    await add(store, keysFor(shardFiles, shard, store.shardCount))
    await store.close()
    await time(beside, 'shard-alone', shardFiles, shard)
    store = kfs(beside, options)
    // vanilla has one shard: the others land in it too.
    await add(store, store.shardCount === 1 ? Array.from({ length: others }, randomKey) : keysFor(others, shard, store.shardCount, { avoid: true }))
    await store.close()
    await time(beside, 'shard-beside-others', shardFiles + others, shard)
    fs.rmSync(beside, { recursive: true, force: true })
    return rows
  }
}

function toCsv (rows) {
  return [HEADER, ...rows.map((r) => [r.engine, r.case, r.storeFiles, r.listed, r.shard, r.run, r.listMs.toFixed(2), r.cliMs.toFixed(2)].join(','))].join('\n') + '\n'
}

// Medians per engine, case and store size: { n, listed, listMs, cliMs, values }.
function summarize (rows) {
  const groups = new Map()
  for (const r of rows) {
    const id = `${r.engine} ${r.case} ${r.storeFiles}`
    if (!groups.has(id)) groups.set(id, [])
    groups.get(id).push(r)
  }
  const out = {}
  for (const [id, rs] of groups) out[id] = { n: rs.length, listed: rs[0].listed, listMs: median(rs.map((r) => r.listMs)), cliMs: median(rs.map((r) => r.cliMs)), values: { listMs: rs.map((r) => r.listMs), cliMs: rs.map((r) => r.cliMs) } }
  return (engine, kase, storeFiles) => out[`${engine} ${kase} ${storeFiles}`]
}

function report (args, engines, rows) {
  const get = summarize(rows)
  const lines = []
  const add = (line = '') => lines.push(line)
  const stores = args.steps.filter((s) => s !== args.oneShardAt)
  add('# `ls`-style listing: kfs and vanilla')
  add()
  add(`Measured with \`node perf/ls.js ${process.argv.slice(2).join(' ')}\` on ${machineOf(args.dir)}, ${new Date().toISOString().slice(0, 10)}; each engine in its own process; files of 1 KiB; ${args.runs} runs of each listing. \`list()\`: the library's listing on a store object just made (shards closed, page cache warm, writeback done before each run). \`kfs list\`: the command as a process, output to /dev/null.${args.quick ? ` **${quickMark('stores')}.**` : ''}`)
  add()
  const cellOf = (c, key) => (c ? (args.runs >= MIN_N ? fmt(c[key]) : c.values[key].map((x) => fmt(x)).join(', ')) : '–')
  const which = args.runs >= MIN_N ? `medians of ${args.runs} runs` : `each run's, ${fewNote(args.runs)}`
  add('## A whole store')
  add()
  for (const [key, name] of [['listMs', 'list()'], ['cliMs', '`kfs list`']]) {
    add(`${name}, ms (lower is better; ${which}):`)
    add()
    add(`| files | ${engines.join(' | ')} | kfs / vanilla |`)
    add(`|---|${engines.map(() => '---').join('|')}|---|`)
    for (const n of stores) {
      const k = get('kfs', 'store', n)
      const v = get('vanilla', 'store', n)
      add(`| ${fmt(n)} | ${engines.map((e) => cellOf(get(e, 'store', n), key)).join(' | ')} | ${k && v ? fmt(k[key] / v[key], 2) : '–'} |`)
    }
    add()
  }
  const first = stores[0]
  const tenth = stores.find((n) => n === 10000) || stores[Math.min(stores.length - 1, 4)]
  add(`Time to list ${fmt(tenth)} files against ${fmt(first)} (linear would be ${fmt(tenth / first, 1)}): ${engines.map((e) => {
    const a = get(e, 'store', first)
    const b = get(e, 'store', tenth)
    return a && b ? `${e} list() ${fmt(b.listMs / a.listMs, 1)}, \`kfs list\` ${fmt(b.cliMs / a.cliMs, 1)}` : `${e} –`
  }).join('; ')}.`)
  add()
  add('## One shard')
  add()
  const shardCases = [
    ['one-shard', args.oneShardAt, `one shard of a store of ${fmt(args.oneShardAt)} files`],
    ['shard-alone', args.shardFiles, `a shard of ${fmt(args.shardFiles)} files, alone`],
    ['shard-beside-others', args.shardFiles + args.others, `the same, beside ${fmt(args.others)} more`]
  ]
  for (const e of engines) {
    add(`${e} (ms, lower is better; ${which}):`)
    add()
    add('| case | files listed | list() | `kfs list` |')
    add('|---|---|---|---|')
    for (const [kase, n, label] of shardCases) {
      const c = get(e, kase, n)
      add(`| ${label} | ${c ? fmt(c.listed) : '–'} | ${cellOf(c, 'listMs')} | ${cellOf(c, 'cliMs')} |`)
    }
    add()
  }
  add(`Beside others / alone: ${engines.map((e) => {
    const a = get(e, 'shard-alone', args.shardFiles)
    const b = get(e, 'shard-beside-others', args.shardFiles + args.others)
    return a && b ? `${e} list() ${fmt(b.listMs / a.listMs, 2)}, \`kfs list\` ${fmt(b.cliMs / a.cliMs, 2)}` : `${e} –`
  }).join('; ')} (vanilla's one shard holds the others too).`)
  add()
  add('![Listing time against files listed](ls.svg)')
  add('![kfs against vanilla](ls-ratio.svg)')
  add()
  return lines.join('\n')
}

// Median times to list a whole store against its files, drawn from the CSV's rows
// (chartsOf), the run's and --from-csv's alike. Log on both axes: the stores grow
// 200-fold and the times span 10 ms to seconds, and time growing in proportion to the
// files is a slope of 1. Then kfs / vanilla by store size, 1.0 marked. No LeoFS figures
// beside them: no source for them can be cited (perf/harness/published.js).
function charts (rows, args) {
  const get = summarize(rows)
  const engines = [...new Set(rows.map((r) => r.engine))]
  const stores = [...new Set(rows.filter((r) => r.case === 'store').map((r) => r.storeFiles))]
  const runs = Math.max(...rows.filter((r) => r.case === 'store').map((r) => r.run))
  const machine = machineFor(args, args.dir)
  const mark = args.quick ? quickMark('stores') : undefined
  const n = runs >= MIN_N ? `medians of n = ${runs} runs` : `medians of n = ${runs} runs (n < ${MIN_N}: no statistics)`
  const series = []
  for (const e of engines) {
    const medians = stores.map((s) => [s, get(e, 'store', s)]).filter(([, m]) => m)
    series.push({ name: `${e}: list()`, points: medians.map(([s, m]) => [s, m.listMs]) })
    series.push({ name: `${e}: list command`, points: medians.map(([s, m]) => [s, m.cliMs]) })
  }
  const out = {}
  out['ls.svg'] = lineChart({
    title: 'Listing a whole store: time (lower is better)',
    subtitle: ['list(): the library\'s call; list command: `kfs list > /dev/null`, a process', `${n}; ${machine}`],
    mark,
    xLabel: 'files listed',
    yLabel: 'ms',
    xScale: 'log',
    yScale: 'log',
    series
  })
  if (engines.includes('kfs') && engines.includes('vanilla')) {
    const ratio = (key) => stores.map((s) => {
      const k = get('kfs', 'store', s)
      const v = get('vanilla', 'store', s)
      return k && v ? k[key] / v[key] : NaN
    })
    out['ls-ratio.svg'] = barChart({
      title: 'Listing a whole store: kfs time / vanilla time (lower is better for kfs)',
      subtitle: [`below 1.0 kfs is faster; ${n}`, machine],
      mark,
      xLabel: 'files listed',
      yLabel: 'kfs / vanilla',
      yScale: 'log',
      reference: 1,
      referenceLabel: '1.0: as fast',
      groups: stores.map((s) => fmt(s)),
      series: [{ name: 'list()', values: ratio('listMs') }, { name: 'list command', values: ratio('cliMs') }]
    })
  }
  return out
}

// A row as charts() needs it, from a record of ls.csv.
const fromCsv = (r) => ({ engine: r.engine, case: r.case, storeFiles: Number(r.store_files), listed: Number(r.listed), run: Number(r.run), listMs: Number(r.list_ms), cliMs: Number(r.cli_ms) })
const REDRAW = { header: HEADER, fromCsv, charts }

async function main (args) {
  fs.mkdirSync(args.dir, { recursive: true })
  const base = fs.mkdtempSync(path.join(args.dir, 'kfs-ls-'))
  const rows = []
  const engines = Object.keys(ENGINES)
  try {
    for (const engine of engines) {
      process.stderr.write(`perf/ls.js: ${engine}\n`)
      const dir = path.join(base, engine)
      fs.mkdirSync(dir)
      const job = { name: 'listings', engine, dir, runs: args.runs, steps: args.steps, oneShardAt: args.oneShardAt, shardFiles: args.shardFiles, others: args.others }
      for (const r of await inChild(SELF, job)) rows.push({ engine, ...r })
    }
  } finally {
    fs.rmSync(base, { recursive: true, force: true })
  }
  const markdown = report(args, engines, rows)
  const csv = toCsv(rows)
  writeOut(args.out, { 'ls.csv': csv, 'ls.md': markdown, ...chartsOf(csv, args, REDRAW) })
  process.stdout.write(markdown + '\n')
  process.stderr.write(`perf/ls.js: wrote ls.csv, ls.md, ls.svg and ls-ratio.svg to ${args.out}\n`)
}

if (require.main === module) runScript(COMMAND, { cases: CASES, main, redraw: REDRAW })

module.exports = { HEADER }

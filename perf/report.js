'use strict'

// Reads a benchmark CSV (perf/benchmark.js) and writes report.md, its tables and
// statistics, and its SVG charts into --out: per operation, the time by file size of
// each engine (median, whiskers over the trials), kfs / vanilla per trial (median,
// whiskers, 1.0 marked) and each size's time trial by trial. With fewer than 5 trials
// of a case, the report prints their values and no statistics.

const fs = require('node:fs')
const path = require('node:path')
const stats = require('./harness/stats')
const { lineChart, barChart } = require('./harness/svg')
const { cli, parseCommandLine, UsageError, MACHINE_OPTION, MIN_N, fewNote } = require('./harness/script')

const ALPHA = 0.05
const OPERATIONS = ['write', 'read', 'unlink']
const COLUMNS = ['trial', 'engine', 'operation', 'size_bytes', 'ms', 'mib_per_s', 'shard', 'db_disk_bytes', 'timestamp']

const COMMAND = cli(__filename, {
  run: 'npm run benchmark:report --',
  positional: [
    { key: 'csv', name: 'results.csv', help: 'the benchmark\'s CSV', required: true },
    { key: 'outDir', name: 'outdir', help: 'as --out' }
  ],
  options: [MACHINE_OPTION],
  check (args) {
    if (args.csv === undefined) throw new UsageError('give the benchmark\'s CSV: results.csv (see --help)')
    if (args.outDir !== undefined) args.out = args.out ?? args.outDir
  }
})

// `npm run benchmark > results.csv` put npm's banner on standard output before the CSV:
// a blank line, "> kfs@0.1.0 benchmark", "> node perf/benchmark.js", a blank line. Only
// such lines are skipped before the header; anything else there is not a benchmark CSV.
const npmBanner = (line) => line.trim() === '' || line.startsWith('> ')

function parseCsv (text) {
  const all = text.trim().split('\n')
  const start = all.findIndex((line) => !npmBanner(line))
  const [header = '', ...lines] = start < 0 ? [] : all.slice(start)
  if (header.trim() !== COLUMNS.join(',')) throw new Error(`not a benchmark CSV: the header is "${header}"`)
  return lines.filter(Boolean).map((line) => {
    const cells = line.split(',')
    const row = Object.fromEntries(COLUMNS.map((c, i) => [c, cells[i]]))
    for (const c of ['trial', 'size_bytes', 'ms', 'shard', 'db_disk_bytes']) row[c] = Number(row[c])
    return row
  })
}

const mib = (bytes) => (bytes / 1024 / 1024).toString().replace(/\.0+$/, '')
const fmt = (x, digits = 1) => (Number.isFinite(x) ? x.toFixed(digits) : '–')
const fmtP = (p) => (!Number.isFinite(p) ? '–' : p < 0.0001 ? '< 0.0001' : p.toFixed(4))

function verdict (kfsTimes, vanillaTimes, p) {
  if (!Number.isFinite(p)) return 'too few trials to test'
  if (p >= ALPHA) return 'no significant difference'
  return stats.mean(kfsTimes) < stats.mean(vanillaTimes) ? 'kfs faster, significant' : 'vanilla faster, significant'
}

// What a set of measurements comes to: with n >= MIN_N, mean, sd, median, p95 and the
// quartiles; with fewer, only the values (and their median, for the charts' bars, and
// min and max, their whiskers).
function describe (xs) {
  const d = { n: xs.length, values: xs, median: stats.median(xs), min: Math.min(...xs), max: Math.max(...xs) }
  if (xs.length < MIN_N) return d
  return { ...d, mean: stats.mean(xs), sd: stats.sd(xs), p95: stats.percentile(xs, 95), q1: stats.percentile(xs, 25), q3: stats.percentile(xs, 75) }
}

// Whiskers of a description: the interquartile range, or min to max under MIN_N.
const whiskers = (d) => (d ? (d.n >= MIN_N ? [d.q1, d.q3] : [d.min, d.max]) : [])

// Summaries per operation and size: { operation, size, engines: { name: describe() },
// ratios: describe(kfs / vanilla of each trial measured on both), and with n >= MIN_N on
// both engines: ratio (of means), t, df, p, verdict }.
function summarize (rows) {
  const engines = [...new Set(rows.map((r) => r.engine))]
  const sizes = [...new Set(rows.map((r) => r.size_bytes))].sort((a, b) => a - b)
  const out = []
  for (const operation of OPERATIONS) {
    for (const size of sizes) {
      const ofCase = rows.filter((r) => r.operation === operation && r.size_bytes === size)
      const times = Object.fromEntries(engines.map((e) => [e, ofCase.filter((r) => r.engine === e).map((r) => r.ms)]))
      if (engines.every((e) => times[e].length === 0)) continue
      const summary = { operation, size, engines: {} }
      for (const e of engines) summary.engines[e] = times[e].length ? describe(times[e]) : undefined
      if (times.kfs && times.vanilla && times.kfs.length && times.vanilla.length) {
        const byTrial = (e) => new Map(ofCase.filter((r) => r.engine === e).map((r) => [r.trial, r.ms]))
        const k = byTrial('kfs')
        const v = byTrial('vanilla')
        const ratios = [...k.keys()].filter((t) => v.has(t)).map((t) => k.get(t) / v.get(t))
        if (ratios.length) summary.ratios = describe(ratios)
        if (times.kfs.length >= MIN_N && times.vanilla.length >= MIN_N) {
          const { t, df, p } = stats.welch(times.kfs, times.vanilla)
          Object.assign(summary, { ratio: stats.mean(times.kfs) / stats.mean(times.vanilla), t, df, p, verdict: verdict(times.kfs, times.vanilla, p) })
        }
      }
      out.push(summary)
    }
  }
  return { engines, sizes, summaries: out }
}

// Every table line of the report fits 100 columns: one table of times per operation
// (engines in rows), one of kfs against vanilla.
function markdown (rows, { engines, sizes, summaries }, charts, { machine, mark }) {
  const trials = Math.max(...rows.map((r) => r.trial))
  const times = rows.map((r) => r.timestamp).sort()
  const few = summaries.some((s) => Object.values(s.engines).some((d) => d && d.n < MIN_N))
  const lines = [
    '# kfs vs vanilla LevelDB: benchmark report',
    '',
    `${rows.length} measurements: ${trials} trials, engines ${engines.join(', ')}, sizes ${sizes.map(mib).join(', ')} MiB, from ${times[0]} to ${times[times.length - 1]}; ${machine}.${mark ? ` **${mark}.**` : ''}`,
    few
      ? `Times in ms. Cases of fewer than ${MIN_N} trials: their values, and no statistics.`
      : `Times in ms (lower is better). kfs / vanilla: mean kfs / mean vanilla (below 1: kfs faster). Two-sided Welch t-test, significant when p < ${ALPHA}.`,
    ''
  ]
  for (const operation of OPERATIONS) {
    const ofOp = summaries.filter((s) => s.operation === operation)
    if (!ofOp.length) continue
    lines.push(`## ${operation}`, '')
    const statistics = ofOp.every((s) => Object.values(s.engines).every((d) => !d || d.n >= MIN_N))
    if (statistics) {
      lines.push('| size | engine | n | mean | sd | median | p95 |', '|---|---|---|---|---|---|---|')
      for (const s of ofOp) {
        engines.forEach((e, i) => {
          const d = s.engines[e]
          if (d) lines.push(`| ${i === 0 ? mib(s.size) + ' MiB' : ''} | ${e} | ${d.n} | ${fmt(d.mean)} | ${fmt(d.sd)} | ${fmt(d.median)} | ${fmt(d.p95)} |`)
        })
      }
      lines.push('')
      if (ofOp.some((s) => s.verdict)) {
        lines.push('| size | kfs / vanilla | t | p | verdict |', '|---|---|---|---|---|')
        for (const s of ofOp) if (s.verdict) lines.push(`| ${mib(s.size)} MiB | ${fmt(s.ratio, 3)} | ${fmt(s.t, 2)} | ${fmtP(s.p)} | ${s.verdict} |`)
        lines.push('')
      }
    } else {
      lines.push('| size | engine | n | ms, trial by trial |', '|---|---|---|---|')
      for (const s of ofOp) {
        engines.forEach((e, i) => {
          const d = s.engines[e]
          if (d) lines.push(`| ${i === 0 ? mib(s.size) + ' MiB' : ''} | ${e} | ${d.n} | ${d.values.map((x) => fmt(x)).join(', ')} |`)
        })
      }
      lines.push('', `${fewNote(Math.min(...ofOp.flatMap((s) => Object.values(s.engines).filter(Boolean).map((d) => d.n))))}.`, '')
    }
  }
  lines.push('## Charts', '')
  for (const chart of charts) lines.push(`![${chart.title}](${chart.file})`, '')
  return lines.join('\n')
}

// The charts: per operation, time by size (log scale: 8 MiB and 512 MiB on one axis)
// with whiskers, kfs / vanilla per trial with 1.0 marked, and each size trial by trial.
function chartsFor (rows, { engines, sizes, summaries }, { machine, mark }) {
  const charts = []
  const nOf = (ds) => {
    const ns = [...new Set(ds.filter(Boolean).map((d) => d.n))]
    return ns.length === 1 ? `n = ${ns[0]}` : `n = ${Math.min(...ns)}-${Math.max(...ns)}`
  }
  const spread = (ds) => (ds.filter(Boolean).every((d) => d.n >= MIN_N) ? 'interquartile range' : `min-max (n < ${MIN_N})`)
  for (const operation of OPERATIONS) {
    const ofOp = summaries.filter((s) => s.operation === operation)
    if (!ofOp.length) continue
    const all = ofOp.flatMap((s) => Object.values(s.engines))
    charts.push({
      file: `charts/time-${operation}.svg`,
      title: `${operation}: median time by size and engine`,
      svg: barChart({
        title: `${operation}: time per file (lower is better)`,
        subtitle: [`median of ${nOf(all)} trials per bar`, machine],
        mark,
        legendNote: ['whiskers:', spread(all)],
        xLabel: 'file size (MiB)',
        yLabel: 'ms',
        yScale: 'log',
        groups: ofOp.map((s) => mib(s.size)),
        series: engines.map((e) => ({ name: e, values: ofOp.map((s) => (s.engines[e] ? s.engines[e].median : NaN)), errors: ofOp.map((s) => whiskers(s.engines[e])) }))
      })
    })
    const withRatios = ofOp.filter((s) => s.ratios)
    if (withRatios.length) {
      const ratios = withRatios.map((s) => s.ratios)
      charts.push({
        file: `charts/ratio-${operation}.svg`,
        title: `${operation}: kfs / vanilla time, trial by trial`,
        svg: barChart({
          title: `${operation}: kfs time / vanilla time (lower is better for kfs)`,
          subtitle: [`median of the ${nOf(ratios)} trials' ratios; below 1.0 kfs is faster`, machine],
          mark,
          legendNote: ['whiskers:', spread(ratios)],
          xLabel: 'file size (MiB)',
          yLabel: 'kfs / vanilla',
          yScale: 'log',
          reference: 1,
          referenceLabel: '1.0: as fast',
          groups: withRatios.map((s) => mib(s.size)),
          series: [{ name: 'kfs / vanilla', values: ratios.map((d) => d.median), errors: ratios.map(whiskers) }]
        })
      })
    }
    for (const size of sizes) {
      const series = engines.map((e) => ({
        name: e,
        points: rows.filter((r) => r.engine === e && r.operation === operation && r.size_bytes === size).map((r) => [r.trial, r.ms])
      })).filter((s) => s.points.length)
      if (!series.length) continue
      charts.push({
        file: `charts/trials-${operation}-${mib(size)}MiB.svg`,
        title: `${operation} ${mib(size)} MiB: time per trial`,
        svg: lineChart({ title: `${operation} ${mib(size)} MiB: time per trial (lower is better)`, subtitle: [`n = ${Math.max(...series.map((s) => s.points.length))} trials`, machine], mark, xLabel: 'trial', yLabel: 'ms', series })
      })
    }
  }
  return charts
}

// machine: what the CSV was measured on, as the report and charts name it; mark: a
// warning they carry in red, such as a --quick run's.
function report (csvFile, outDir, { machine = 'machine not recorded in the CSV (perf/report.js --machine names it)', mark } = {}) {
  const rows = parseCsv(fs.readFileSync(csvFile, 'utf8'))
  if (!rows.length) throw new Error(`${csvFile} holds no measurements`)
  const summary = summarize(rows)
  const charts = chartsFor(rows, summary, { machine, mark })
  fs.mkdirSync(path.join(outDir, 'charts'), { recursive: true })
  for (const chart of charts) fs.writeFileSync(path.join(outDir, chart.file), chart.svg)
  const md = markdown(rows, summary, charts, { machine, mark })
  fs.writeFileSync(path.join(outDir, 'report.md'), md)
  return { summary, charts, file: path.join(outDir, 'report.md') }
}

module.exports = { COMMAND, parseCsv, summarize, report }

if (require.main === module) {
  const args = parseCommandLine(COMMAND)
  try {
    const { file, charts } = report(args.csv, args.out, { machine: args.machine })
    process.stdout.write(`wrote ${file} and ${charts.length} charts in ${path.join(args.out, 'charts')}\n`)
  } catch (err) {
    process.stderr.write(`perf/report.js: ${err.message}\n`)
    process.exitCode = 1
  }
}

'use strict'

// Reads a benchmark CSV and writes a Markdown summary with statistics and SVG charts.
//
//   npm run benchmark:report -- results.csv [outdir]     (outdir defaults to ./report)

const fs = require('node:fs')
const path = require('node:path')
const stats = require('./stats')
const { lineChart, barChart } = require('./svg')

const ALPHA = 0.05
const OPERATIONS = ['write', 'read', 'unlink']
const COLUMNS = ['trial', 'engine', 'operation', 'size_bytes', 'ms', 'mib_per_s', 'shard', 'db_disk_bytes', 'timestamp']

// `npm run benchmark > results.csv` puts npm's banner on standard output before the CSV:
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

// Summaries per operation and size: { operation, size, engines: { name: {n, mean, ...} }, ratio, t, p, verdict }
function summarize (rows) {
  const engines = [...new Set(rows.map((r) => r.engine))]
  const sizes = [...new Set(rows.map((r) => r.size_bytes))].sort((a, b) => a - b)
  const out = []
  for (const operation of OPERATIONS) {
    for (const size of sizes) {
      const times = Object.fromEntries(engines.map((e) => [e, rows.filter((r) => r.engine === e && r.operation === operation && r.size_bytes === size).map((r) => r.ms)]))
      if (engines.every((e) => times[e].length === 0)) continue
      const summary = { operation, size, engines: {} }
      for (const e of engines) {
        const xs = times[e]
        summary.engines[e] = xs.length ? { n: xs.length, mean: stats.mean(xs), sd: stats.sd(xs), median: stats.median(xs), p95: stats.percentile(xs, 95) } : undefined
      }
      if (times.kfs && times.vanilla && times.kfs.length && times.vanilla.length) {
        const { t, df, p } = stats.welch(times.kfs, times.vanilla)
        Object.assign(summary, { ratio: stats.mean(times.kfs) / stats.mean(times.vanilla), t, df, p, verdict: verdict(times.kfs, times.vanilla, p) })
      }
      out.push(summary)
    }
  }
  return { engines, sizes, summaries: out }
}

function markdown (rows, { engines, sizes, summaries }, charts) {
  const trials = Math.max(...rows.map((r) => r.trial))
  const times = rows.map((r) => r.timestamp).sort()
  const lines = [
    '# kfs vs vanilla LevelDB: benchmark report',
    '',
    `${rows.length} measurements: ${trials} trials, engines ${engines.join(', ')}, sizes ${sizes.map(mib).join(', ')} MiB, from ${times[0]} to ${times[times.length - 1]}.`,
    `Times in ms. Ratio = mean kfs / mean vanilla (below 1: kfs faster). Two-sided Welch t-test, significant when p < ${ALPHA}.`,
    ''
  ]
  for (const operation of OPERATIONS) {
    const ofOp = summaries.filter((s) => s.operation === operation)
    if (!ofOp.length) continue
    lines.push(`## ${operation}`, '')
    lines.push('| size | engine | n | mean | sd | median | p95 | kfs / vanilla | t | p | verdict |', '|---|---|---|---|---|---|---|---|---|---|---|')
    for (const s of ofOp) {
      engines.forEach((e, i) => {
        const st = s.engines[e]
        if (!st) return
        const tail = i === 0 ? [fmt(s.ratio, 3), fmt(s.t, 2), fmtP(s.p), s.verdict || ''] : ['', '', '', '']
        lines.push(`| ${i === 0 ? mib(s.size) + ' MiB' : ''} | ${e} | ${st.n} | ${fmt(st.mean)} | ${fmt(st.sd)} | ${fmt(st.median)} | ${fmt(st.p95)} | ${tail.join(' | ')} |`)
      })
    }
    lines.push('')
  }
  lines.push('## Charts', '')
  for (const chart of charts) lines.push(`![${chart.title}](${chart.file})`, '')
  return lines.join('\n')
}

function chartsFor (rows, { engines, sizes, summaries }) {
  const charts = []
  for (const operation of OPERATIONS) {
    const ofOp = summaries.filter((s) => s.operation === operation)
    if (!ofOp.length) continue
    for (const stat of ['mean', 'sd']) {
      charts.push({
        file: `charts/${stat}-${operation}.svg`,
        title: `${operation}: ${stat === 'mean' ? 'mean' : 'standard deviation of'} time by size and engine`,
        svg: barChart({
          title: `${operation}: ${stat === 'mean' ? 'mean time' : 'standard deviation'}`,
          xLabel: 'file size (MiB)',
          yLabel: 'ms',
          groups: ofOp.map((s) => mib(s.size)),
          series: engines.map((e) => ({ name: e, values: ofOp.map((s) => (s.engines[e] ? s.engines[e][stat] : NaN)) }))
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
        svg: lineChart({ title: `${operation} ${mib(size)} MiB: time per trial`, xLabel: 'trial', yLabel: 'ms', series })
      })
    }
  }
  return charts
}

function report (csvFile, outDir) {
  const rows = parseCsv(fs.readFileSync(csvFile, 'utf8'))
  if (!rows.length) throw new Error(`${csvFile} holds no measurements`)
  const summary = summarize(rows)
  const charts = chartsFor(rows, summary)
  fs.mkdirSync(path.join(outDir, 'charts'), { recursive: true })
  for (const chart of charts) fs.writeFileSync(path.join(outDir, chart.file), chart.svg)
  const md = markdown(rows, summary, charts)
  fs.writeFileSync(path.join(outDir, 'report.md'), md)
  return { summary, charts, file: path.join(outDir, 'report.md') }
}

module.exports = { parseCsv, summarize, report }

if (require.main === module) {
  const [csvFile, outDir = 'report'] = process.argv.slice(2)
  if (!csvFile || csvFile.startsWith('-')) {
    process.stderr.write('usage: npm run benchmark:report -- results.csv [outdir]\n')
    process.exit(2)
  }
  try {
    const { file, charts } = report(csvFile, outDir)
    process.stdout.write(`wrote ${file} and ${charts.length} charts in ${path.join(outDir, 'charts')}\n`)
  } catch (err) {
    process.stderr.write(`benchmark:report: ${err.message}\n`)
    process.exitCode = 1
  }
}

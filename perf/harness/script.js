'use strict'

// What the perf scripts share: the entry point of a script whose cases run in child
// processes, its output, charts drawn again from a CSV, the machine a report names, and
// numbers as reports print them. The command line is command-line.js's, exported here
// too, so that a script needs one require.

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { Writable } = require('node:stream')
const { pipeline } = require('node:stream/promises')
const { execFileSync } = require('node:child_process')
const { serve } = require('./child')
const { cli, parseCommandLine, topComment, UsageError, KiB, MiB, GiB } = require('./command-line')

// What the script of `command` prints on standard output, also written to
// DIR/<script>.md; on exit, where it went, on stderr.
function teeOutput (args, command) {
  fs.mkdirSync(args.out, { recursive: true })
  const file = path.join(args.out, `${command.script}.md`)
  const fd = fs.openSync(file, 'w')
  const write = process.stdout.write.bind(process.stdout)
  process.stdout.write = (chunk, ...rest) => {
    fs.writeSync(fd, chunk)
    return write(chunk, ...rest)
  }
  process.on('exit', () => process.stderr.write(`${command.name}: output also in ${file}\n`))
  return file
}

// The entry point of a script whose cases run in child processes: a child (started with
// `--child JSON`) runs its case; with `--from-csv FILE`, the charts are drawn again from
// a run's CSV (redraw); otherwise the parent runs main(args), its standard output also
// written to --out as <script>.md when `tee`. --help prints the usage; bad arguments
// exit with 2, a failed run with 1, each with one line on stderr.
function runScript (command, { cases, main, redraw, tee }) {
  const args = parseCommandLine(command)
  const name = command.name
  if (args.child) return serve(cases, args.child)
  if (tee && !args.fromCsv) teeOutput(args, command)
  const run = args.fromCsv ? async () => drawAgain(name, args, redraw) : main
  run(args).catch((err) => {
    process.stderr.write(`${name}: ${err.message}\n`)
    process.exitCode = 1
  })
}

// files: { name: text }, written in dir (made if missing); returns their names.
function writeOut (dir, files) {
  fs.mkdirSync(dir, { recursive: true })
  for (const [file, text] of Object.entries(files)) fs.writeFileSync(path.join(dir, file), text)
  return Object.keys(files)
}

// The charts of a run, drawn from its CSV: by the run itself, and again by --from-csv,
// so that a change to the charts needs no new run (the full ones take most of an hour)
// and draws what the run would have. charts(rows, args) draws them from the rows
// fromCsv(record) makes of the CSV's records; returns { file: SVG }.
function chartsOf (csv, args, { header, fromCsv, charts }, source = 'the CSV') {
  const [first, ...lines] = csv.trim().split('\n')
  if (first !== header) throw new Error(`${source} is not this script's CSV: its header is "${first}"`)
  const columns = header.split(',')
  return charts(lines.filter(Boolean).map((line) => fromCsv(Object.fromEntries(line.split(',').map((cell, i) => [columns[i], cell])))), args)
}

// --from-csv: the charts drawn again into --out. The Markdown report, which describes
// the machine and the day of the run, is left as it is.
function drawAgain (name, args, redraw) {
  const files = writeOut(args.out, chartsOf(fs.readFileSync(args.fromCsv, 'utf8'), args, redraw, args.fromCsv))
  process.stderr.write(`${name}: drew ${files.join(', ')} in ${args.out} from ${args.fromCsv}\n`)
}

// This machine as a chart's subtitle names it: cores, CPU, RAM, and the filesystem of
// `dir` (where the data lived) when given.
function machineOf (dir) {
  const cpus = os.cpus()
  let filesystem = ''
  try {
    if (dir) filesystem = `, ${execFileSync('df', ['-PT', dir], { encoding: 'utf8' }).trim().split('\n')[1].split(/\s+/)[1]}`
  } catch { /* an unknown filesystem: not named */ }
  return `${cpus.length} × ${cpus[0] ? cpus[0].model.trim().split(/\s+/).slice(0, 2).join(' ') : 'unknown CPU'}, ${fmt(os.totalmem() / GiB, 1)} GiB RAM${filesystem}`
}

// The checkout's commit, short, for a report.
function commitOf () {
  try {
    return execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: __dirname, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim()
  } catch {
    return 'unknown'
  }
}

// The filesystem `dir` is on, for a report: its type and device.
function filesystemOf (dir) {
  try {
    const [, line] = execFileSync('df', ['-PT', dir], { encoding: 'utf8' }).trim().split('\n')
    const [device, type] = line.split(/\s+/)
    return `${type} (${device})`
  } catch {
    return 'an unknown filesystem'
  }
}

// A chart's subtitle for what was measured where: machine as given to --machine, this
// machine's for a run, or said to be unknown when charts are drawn again from a CSV.
const MACHINE_OPTION = { name: '--machine', type: 'string', arg: 'TEXT', help: 'the machine the CSV was measured on, for the charts\' subtitle when they are drawn from a CSV (a run names its own)' }
const machineFor = (args, dir) => args.machine || (args.fromCsv ? 'machine not recorded' : machineOf(dir))

// What a --quick run's report and charts say of themselves.
const quickMark = (what) => `--quick: tiny ${what}, measures nothing`

// Fewer measurements than this get no statistics (percentiles, tests, intervals,
// standard deviations): their values are printed as they are.
const MIN_N = 5
const fewNote = (n) => `n = ${n} < ${MIN_N}: no statistics`

// 1,234.5 with `digits` decimals; '–' for a figure that is missing.
const fmt = (n, digits = 0) => (Number.isFinite(n) ? n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits }) : '–')

// Reads a stream to its end, dropping what it reads.
function drain (readable) {
  return pipeline(readable, new Writable({ write: (chunk, enc, cb) => cb() }))
}

// Writes `data` to a new or truncated `file`, fsynced before it is closed when `sync`.
async function fsWrite (file, data, sync) {
  const handle = await fs.promises.open(file, 'w')
  try {
    await handle.writeFile(data)
    if (sync) await handle.sync()
  } finally {
    await handle.close()
  }
}

// n workers take items from the list, or the numbers 0 to items - 1 when `items` is a
// number (no list held: a million uploads need none), and await read(item) until none
// is left.
async function inFlight (n, items, read) {
  const count = typeof items === 'number' ? items : items.length
  const at = typeof items === 'number' ? (i) => i : (i) => items[i]
  let next = 0
  await Promise.all(Array.from({ length: n }, async () => {
    while (next < count) await read(at(next++))
  }))
}

module.exports = { machineOf, machineFor, commitOf, filesystemOf, MACHINE_OPTION, MIN_N, fewNote, cli, parseCommandLine, teeOutput, topComment, drain, fsWrite, inFlight, runScript, writeOut, chartsOf, quickMark, UsageError, fmt, KiB, MiB, GiB }

'use strict'

// What the perf scripts that run their cases in child processes share: the entry point,
// reading options, writing and redrawing charts, and numbers as their reports print them.

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { Writable } = require('node:stream')
const { pipeline } = require('node:stream/promises')
const { execFileSync } = require('node:child_process')
const { serve } = require('./child')

const ROOT = path.join(__dirname, '..', '..')
const KiB = 1024
const MiB = 1024 * KiB
const GiB = 1024 * MiB

// Bad arguments: the script prints the message and exits with 2.
class UsageError extends Error {}

// The command line of every perf script: options declared once (name, type, default,
// help), parsed by one parser, and --help's usage generated from the declarations and
// the comment at the top of the script.
//
// Types: count (a positive integer), number (a positive number), size (bytes: 256K, 1M,
// 10G, powers of 1024, or a plain number), string, path (made absolute), flag (no value;
// `sets: {...}` assigns those values too, as --quick does), list (comma-separated, each
// item of type `of`, one of `values` when given), json (for --child, hidden).
//
// Every script takes --out DIR: everything it writes (CSV, Markdown report, SVG charts;
// for the scripts that print a report, the report as <script>.md) goes into DIR, made if
// missing. Without --out, DIR is a new directory kfs-bench-<script>-<date>-<time> in the
// OS temp directory (os.tmpdir()), printed on stderr at the end: a run never writes into
// the checkout unless told to, and never only to the terminal. --help or -h prints the
// usage; an unknown argument or a bad value prints one line and exits with 2.

const OUT_HELP = 'where results go (made if missing; default: a new directory ' +
  'kfs-bench-<script>-<date>-<time> in the temp dir)'

const camel = (name) => name.replace(/^--/, '').replace(/-([a-z0-9])/g, (m, c) => c.toUpperCase())

function parseNumber (text, option) {
  const n = Number(text)
  if (!(n > 0) || !Number.isFinite(n)) throw new UsageError(`${option} takes a positive number, got ${JSON.stringify(text)}`)
  return n
}

const TYPES = {
  count: parseCount,
  number: parseNumber,
  size: parseSize,
  string: (text) => text,
  path: (text) => path.resolve(text),
  json: (text, option) => {
    try {
      return JSON.parse(text)
    } catch {
      throw new UsageError(`${option} takes JSON`)
    }
  }
}
const ARGS = { count: 'N', number: 'X', size: 'SIZE', string: 'TEXT', path: 'DIR', list: 'LIST', json: 'JSON' }

// A value of the option's type, from text.
function convert (option, text) {
  if (option.type !== 'list') return TYPES[option.type](text, option.name)
  const items = text.split(',').filter((s) => s !== '').map((s) => TYPES[option.of || 'string'](s, option.name))
  if (!items.length) throw new UsageError(`${option.name} takes a comma-separated list`)
  const unknown = option.values && items.find((v) => !option.values.includes(v))
  if (unknown !== undefined) throw new UsageError(`${option.name}: unknown value ${unknown} (known: ${option.values.join(', ')})`)
  return items
}

// The top comment of `file` after its 'use strict': the script's description.
function topComment (file) {
  const lines = fs.readFileSync(file, 'utf8').split('\n')
  const start = lines.findIndex((line) => line.startsWith('//'))
  const end = lines.findIndex((line, i) => i > start && !line.startsWith('//'))
  return lines.slice(start, end < 0 ? undefined : end).map((line) => line.replace(/^\/\/ ?/, '')).join('\n')
}

// A command line: cli(file, { run, options, positional, check }).
// file: the script's __filename; run: how it is started (`npm run benchmark:fio --`), by
// default `node FILE`, FILE its path from the checkout's root (perf/probes/costs.js);
// options: [{ name: '--file-size', type, default, arg, help, key, of, values, sets,
// hidden }]; positional: [{ key, name, type, help, required }]; defaults: values of what
// no option sets (--quick's presets may); check(args): throws UsageError for a bad
// combination, and may complete args. Returns { parse(argv), usage(), script: the file's
// name without .js, name: FILE, as messages name the script }.
function cli (file, { run, options = [], positional = [], defaults = {}, check } = {}) {
  const script = path.basename(file, '.js')
  const name = path.relative(ROOT, file)
  const all = [
    ...options.map((o) => ({ key: camel(o.name), ...o })),
    { name: '--out', key: 'out', type: 'string', arg: 'DIR', help: OUT_HELP },
    { name: '--help', key: 'help', type: 'flag', short: '-h', help: 'print this help' },
    { name: '--child', key: 'child', type: 'json', hidden: true }
  ]
  const byName = new Map()
  for (const o of all) {
    byName.set(o.name, o)
    if (o.short) byName.set(o.short, o)
  }
  const invocation = run || `node ${name}`

  function usage () {
    const shown = all.filter((o) => !o.hidden)
    const withArg = (o) => `${o.name}${o.type === 'flag' ? '' : ` ${o.arg || ARGS[o.type]}`}`
    const flag = (o) => `${o.short ? `${o.short}, ` : ''}${withArg(o)}`
    const synopsis = [...positional.map((p) => (p.required ? p.name : `[${p.name}]`)), ...shown.filter((o) => o.name !== '--help').map((o) => `[${withArg(o)}]`)]
    const lines = []
    let line = `usage: ${invocation}`
    for (const word of synopsis) {
      if (line.length + word.length + 1 > 98) {
        lines.push(line)
        line = ' '.repeat(Math.min(invocation.length + 8, 40)) + word
      } else line += ` ${word}`
    }
    lines.push(line, '')
    const width = Math.min(24, Math.max(...[...positional.map((p) => p.name), ...shown.map(flag)].map((s) => s.length)) + 2)
    const describe = (left, text, value) => {
      const withDefault = value === undefined ? text : `${text} (default: ${value})`
      const pad = left.length >= width ? `\n${' '.repeat(width + 2)}` : ' '.repeat(width - left.length)
      return `  ${left}${pad}${wrap(withDefault, 96 - width).join(`\n${' '.repeat(width + 2)}`)}`
    }
    for (const p of positional) lines.push(describe(p.name, p.help || ''))
    for (const o of shown) lines.push(describe(flag(o), o.help || '', o.type === 'flag' || o.default === undefined ? undefined : shownDefault(o)))
    return `${lines.join('\n')}\n\n${topComment(file)}\n`
  }

  function parse (argv) {
    const args = { ...defaults, ...Object.fromEntries(all.filter((o) => o.type !== 'flag' || !o.sets).map((o) => [o.key, o.type === 'flag' ? false : o.default])) }
    const values = []
    for (let i = 0; i < argv.length; i++) {
      const arg = argv[i]
      const eq = arg.startsWith('--') ? arg.indexOf('=') : -1
      const name = eq > 0 ? arg.slice(0, eq) : arg
      const option = byName.get(name)
      if (!option) {
        if (arg.startsWith('-') && arg !== '-') throw new UsageError(`unknown argument ${arg} (see --help)`)
        if (values.length >= positional.length) throw new UsageError(`unknown argument ${arg} (see --help)`)
        values.push(arg)
        continue
      }
      if (option.type === 'flag') {
        if (eq > 0) throw new UsageError(`${name} takes no value`)
        if (option.sets) Object.assign(args, option.sets)
        else args[option.key] = true
        continue
      }
      const text = eq > 0 ? arg.slice(eq + 1) : optionValue(argv, ++i)
      args[option.key] = convert(option, text)
    }
    positional.forEach((p, i) => {
      if (values[i] !== undefined) args[p.key] = TYPES[p.type || 'string'](values[i], p.name)
    })
    if (!args.help && check) check(args)
    if (args.out === undefined) args.out = defaultOut(script)
    return args
  }

  return { parse, usage, script, name }
}

const shownDefault = (o) => (o.shown !== undefined ? o.shown : Array.isArray(o.default) ? o.default.join(',') : o.default)

function wrap (text, width) {
  const lines = []
  let line = ''
  for (const word of text.split(' ')) {
    if (line && line.length + word.length + 1 > width) {
      lines.push(line)
      line = word
    } else line = line ? `${line} ${word}` : word
  }
  return [...lines, line]
}

// A new directory's name in the temp dir, for a run given no --out.
function defaultOut (script) {
  const stamp = new Date().toISOString().replace(/[-:]/g, '').replace('T', '-').slice(0, 15)
  return path.join(os.tmpdir(), `kfs-bench-${script}-${stamp}`)
}

// Parses process.argv for a script that is not run by runScript: prints the usage and
// exits with 0 on --help, prints one line and exits with 2 on a bad argument; returns
// the arguments otherwise.
function parseCommandLine (command, argv = process.argv.slice(2)) {
  let args
  try {
    args = command.parse(argv)
  } catch (err) {
    if (!(err instanceof UsageError)) throw err
    process.stderr.write(`${command.name}: ${err.message}\n`)
    process.exit(2)
  }
  if (args.help) {
    process.stdout.write(command.usage())
    process.exit(0)
  }
  return args
}

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

// argv[i], the value of the option at argv[i - 1].
function optionValue (argv, i) {
  if (i >= argv.length) throw new UsageError(`${argv[i - 1]} needs a value`)
  return argv[i]
}

function parseCount (text, option) {
  const n = Number(text)
  if (!Number.isSafeInteger(n) || n < 1) throw new UsageError(`${option} takes a positive integer, got ${JSON.stringify(text)}`)
  return n
}

// Bytes from 256K, 1M, 10G (powers of 1024) or a plain number.
function parseSize (text, option) {
  const match = /^(\d+(?:\.\d+)?)([KMG]?)$/i.exec(String(text).trim())
  const bytes = match && Math.round(Number(match[1]) * ({ '': 1, K: KiB, M: MiB, G: GiB })[match[2].toUpperCase()])
  if (!(bytes > 0)) throw new UsageError(`${option} takes a size such as 256K, 1M or 10G, got ${JSON.stringify(text)}`)
  return bytes
}

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

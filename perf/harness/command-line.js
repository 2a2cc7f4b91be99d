'use strict'

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

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')

const ROOT = path.join(__dirname, '..', '..')
const KiB = 1024
const MiB = 1024 * KiB
const GiB = 1024 * MiB

// Bad arguments: the script prints the message and exits with 2.
class UsageError extends Error {}

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

  const usage = () => usageOf(file, invocation, all, positional)

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

// --help's text: the synopsis of `invocation`, the options `all` and `positional`,
// each with its help and default, then the top comment of `file`.
function usageOf (file, invocation, all, positional) {
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

module.exports = { cli, parseCommandLine, topComment, UsageError, KiB, MiB, GiB }

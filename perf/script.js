'use strict'

// What the perf scripts that run their cases in child processes share: the entry point,
// reading options, writing and redrawing charts, and numbers as their reports print them.

const fs = require('node:fs')
const path = require('node:path')
const { Writable } = require('node:stream')
const { pipeline } = require('node:stream/promises')
const { serve } = require('./child')

const KiB = 1024
const MiB = 1024 * KiB
const GiB = 1024 * MiB

// Bad arguments: the script prints the message and exits with 2.
class UsageError extends Error {}

// The entry point: a child (started with `--child JSON`) runs its case; with
// `--from-csv FILE`, the charts are drawn again from a run's CSV (redraw); otherwise
// the parent runs main(args). Bad arguments exit with 2, a failed run with 1, each with
// one line on stderr.
function runScript (name, { parseArgs, cases, main, redraw }) {
  let args
  try {
    args = parseArgs(process.argv.slice(2))
  } catch (err) {
    process.stderr.write(`${name}: ${err.message}\n`)
    process.exit(2)
  }
  if (args.child) serve(cases, args.child)
  else {
    const run = args.fromCsv ? async () => drawAgain(name, args, redraw) : main
    run(args).catch((err) => {
      process.stderr.write(`${name}: ${err.message}\n`)
      process.exitCode = 1
    })
  }
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

// n workers take items from the list and await read(item) until it is empty.
async function inFlight (n, items, read) {
  let next = 0
  await Promise.all(Array.from({ length: n }, async () => {
    while (next < items.length) await read(items[next++])
  }))
}

module.exports = { drain, fsWrite, inFlight, runScript, writeOut, chartsOf, quickMark, UsageError, optionValue, parseCount, parseSize, fmt, KiB, MiB, GiB }

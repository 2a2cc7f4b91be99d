'use strict'

// What the perf scripts that run their cases in child processes share: the entry point,
// reading options, and numbers as their reports print them.

const { serve } = require('./child')

const KiB = 1024
const MiB = 1024 * KiB
const GiB = 1024 * MiB

// Bad arguments: the script prints the message and exits with 2.
class UsageError extends Error {}

// The entry point: a child (started with `--child JSON`) runs its case; the parent runs
// main(args). Bad arguments exit with 2, a failed run with 1, each with one line on stderr.
function runScript (name, { parseArgs, cases, main }) {
  let args
  try {
    args = parseArgs(process.argv.slice(2))
  } catch (err) {
    process.stderr.write(`${name}: ${err.message}\n`)
    process.exit(2)
  }
  if (args.child) serve(cases, args.child)
  else {
    main(args).catch((err) => {
      process.stderr.write(`${name}: ${err.message}\n`)
      process.exitCode = 1
    })
  }
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

// 1,234.5 with `digits` decimals; '–' for a figure that is missing.
const fmt = (n, digits = 0) => (Number.isFinite(n) ? n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits }) : '–')

module.exports = { runScript, UsageError, optionValue, parseCount, parseSize, fmt, KiB, MiB, GiB }

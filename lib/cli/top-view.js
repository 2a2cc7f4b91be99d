'use strict'

const { humanSize } = require('./text')
const { DURATION_BUCKETS } = require('../..')

// What kfs top shows, from store.metrics() samples: pure functions of the samples and the
// width, so that the screen can be tested without one.

const SPARKS = '▁▂▃▄▅▆▇█'
const HISTORY = 60 // samples in a sparkline: a minute at one a second

// The methods' calls between two samples `before` and `after` (metrics()' `operations`),
// `seconds` apart: { [method]: { calls, perSecond, p99 } }, p99 in seconds (the upper bound
// of the histogram bucket it falls in; Infinity past the last), for methods with calls.
function rates (before, after, seconds) {
  const out = {}
  for (const [method, now] of Object.entries(after)) {
    const then = before[method]
    const calls = now.count - (then ? then.count : 0)
    if (calls <= 0) continue
    const buckets = now.seconds.buckets.map((n, i) => n - (then ? then.seconds.buckets[i] : 0))
    out[method] = { calls, perSecond: seconds > 0 ? calls / seconds : 0, p99: quantile(buckets, 0.99) }
  }
  return out
}

// The upper bound of the bucket (lib/api/metrics.js's DURATION_BUCKETS, then +Inf) that
// holds the q-quantile of `buckets`, cumulative counts.
function quantile (buckets, q, bounds = DURATION_BUCKETS) {
  const total = buckets[buckets.length - 1]
  const i = buckets.findIndex((n) => n >= q * total)
  return i < bounds.length ? bounds[i] : Infinity
}

// `values` as a line of block characters, scaled to their largest, the newest last.
function sparkline (values) {
  const top = Math.max(...values, 0)
  return values.map((v) => SPARKS[top > 0 ? Math.min(SPARKS.length - 1, Math.floor((v / top) * (SPARKS.length - 1))) : 0]).join('')
}

const ms = (seconds) => (seconds === Infinity ? '> 10 s' : seconds >= 1 ? `≤ ${seconds} s` : `≤ ${+(seconds * 1000).toFixed(2)} ms`)

// The screen's lines, each at most `width` characters, `height` lines at most: operations
// that do not fit are counted on the last line (a line more would scroll the screen,
// taking the top line away). `state`: { location, held (the holder's pid, or undefined
// where no process holds the store), metrics, rates (rates(), or undefined for a single
// snapshot), history: { [method]: per-second values, and total }, interval (seconds between
// two samples, 1 unless said), at (a Date) }.
function view ({ location, held, metrics: m, rates: r, history = {}, interval = 1, at }, width = 80, height = Infinity) {
  const lines = [
    `kfs top  ${location}  ${at.toISOString().slice(11, 19)} UTC`,
    (held !== undefined ? `held by process ${held}` : 'no process holds the store: its figures as of their last close, no operations') + (r ? '; q quits' : ''),
    '',
    `files ${m.files}   bytes ${humanSize(m.fileBytes)}   reclaimable ${humanSize(m.reclaimableBytes)}   disk ${humanSize(m.diskBytes)}   reserve ${humanSize(m.reserveBytes)}`,
    `shards ${m.shardsOpen} open of ${m.shards}${m.shardsUncounted ? ` (${m.shardsUncounted} not counted until opened)` : ''}   clients ${m.clients}`,
    `memory write ${humanSize(m.memory.write)}   readahead ${humanSize(m.memory.readahead)}   memtables ${humanSize(m.memory.memtables)}   of ${humanSize(m.memory.budget)}`,
    ''
  ]
  lines.push(...operationLines(m, r, history, width, interval))
  return fit(lines, height).map((line) => (line.length > width ? line.slice(0, Math.max(0, width - 1)) + '…' : line))
}

// `lines` cut to `height`, the last line kept saying how many more there were.
function fit (lines, height) {
  const rows = Math.max(1, height)
  if (lines.length <= rows) return lines
  return [...lines.slice(0, rows - 1), `… ${lines.length - rows + 1} lines more: a taller terminal shows them`]
}

// A row per method with calls: per second and p99 over the last interval with a sparkline of
// the last HISTORY samples (a minute at one a second); for a single snapshot, calls and p99
// since the holder opened the store.
function operationLines (m, r, history, width, interval) {
  if (!r) {
    const since = rates({}, m.operations, 0)
    const rows = Object.entries(since).map(([method, o]) => `${method.padEnd(18)} ${String(o.calls).padStart(10)}   p99 ${ms(o.p99)}`)
    return [`${'operation'.padEnd(18)} ${'calls'.padStart(10)}   since the store opened`, ...(rows.length ? rows : ['(none)'])]
  }
  const spark = Math.max(0, Math.min(HISTORY, width - 44))
  const total = Object.values(r).reduce((sum, o) => sum + o.perSecond, 0)
  const rows = [`${'operation'.padEnd(18)} ${'per s'.padStart(9)} ${'p99'.padStart(12)}  ${interval === 1 ? 'last minute' : `last ${+(HISTORY * interval).toFixed(1)} s`}`,
    `${'all'.padEnd(18)} ${total.toFixed(1).padStart(9)} ${''.padStart(12)}  ${sparkline((history.total || []).slice(-spark))}`]
  for (const method of Object.keys(history).filter((k) => k !== 'total').sort()) {
    const o = r[method]
    const values = history[method].slice(-spark)
    if (!o && !values.some((v) => v > 0)) continue
    rows.push(`${method.padEnd(18)} ${(o ? o.perSecond : 0).toFixed(1).padStart(9)} ${(o ? ms(o.p99) : '').padStart(12)}  ${sparkline(values)}`)
  }
  return rows
}

// `history` with the samples of `r` added, each series HISTORY long at most.
function remember (history, r) {
  const next = {}
  const keys = new Set([...Object.keys(history), ...Object.keys(r), 'total'])
  for (const key of keys) {
    const value = key === 'total' ? Object.values(r).reduce((sum, o) => sum + o.perSecond, 0) : (r[key] ? r[key].perSecond : 0)
    next[key] = [...(history[key] || []), value].slice(-HISTORY)
  }
  return next
}

module.exports = { rates, quantile, sparkline, view, remember }

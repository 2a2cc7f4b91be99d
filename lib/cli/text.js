'use strict'

const UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB']

// 1536 -> "1.5 KiB"; 34359738368 -> "32.0 GiB"
function humanSize (bytes) {
  let value = bytes
  let unit = 0
  while (value >= 1024 && unit < UNITS.length - 1) {
    value /= 1024
    unit++
  }
  return unit === 0 ? `${bytes} B` : `${value.toFixed(1)} ${UNITS[unit]}`
}

function duration (seconds) {
  if (!Number.isFinite(seconds)) return '--:--'
  const s = Math.round(seconds)
  const h = Math.floor(s / 3600)
  const m = Math.floor((s % 3600) / 60)
  const pad = (n) => String(n).padStart(2, '0')
  return h ? `${h}:${pad(m)}:${pad(s % 60)}` : `${pad(m)}:${pad(s % 60)}`
}

// Columns padded to the widest cell; the last column is not padded.
function table (rows) {
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => String(r[i]).length)))
  return rows.map((r) => r.map((cell, i) => (i === r.length - 1 ? String(cell) : String(cell).padEnd(widths[i]))).join('  ')).join('\n') + '\n'
}

// One line, in the user's terms: kfs errors carry their own message; system errors
// become "<path>: <reason>".
function describeError (err) {
  if (err && err.syscall) {
    const reason = systemReason(err)
    if (err.path) return `${err.path}: ${reason}`
    return err.syscall === 'write' ? `cannot write the output: ${reason}` : reason
  }
  return err && err.message ? err.message : String(err)
}

// A system error's reason alone: "EACCES: permission denied, open 'x'" -> "permission denied".
function systemReason (err) {
  return String(err.message).replace(/^E[A-Z]+: /, '').split(', ')[0]
}

// "042": a shard as kfs's messages name it.
const shardName = (index) => String(index).padStart(3, '0')

// A name as one field of a tab-separated line: backslash, tab, newline, carriage return
// and other control characters are escaped (\\, \t, \n, \r, \xHH), so a name can
// neither end its line nor add a field.
const ESCAPES = { '\\': '\\\\', '\t': '\\t', '\n': '\\n', '\r': '\\r' }
function escapeField (text) {
  // eslint-disable-next-line no-control-regex
  return text.replace(/[\\\x00-\x1f\x7f]/g, (c) => ESCAPES[c] || `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`)
}

module.exports = { humanSize, duration, table, describeError, systemReason, escapeField, shardName }

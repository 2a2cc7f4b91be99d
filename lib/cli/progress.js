'use strict'

const { Transform } = require('node:stream')
const { pipeline } = require('node:stream/promises')
const { humanSize, duration } = require('./text')

const MIN_BYTES = 4 * 1024 * 1024 // smaller transfers finish before a bar is worth drawing
const REDRAW_MS = 100

// The bars on screen: a signal ending the process clears them (clearProgress()), so that
// the shell's prompt does not follow a stale bar.
const shown = new Set()

// A one-line progress bar (bytes, rate, ETA) on a terminal. It redraws from the data
// flowing through meter(), so it needs no timer.
class Progress {
  // Returns undefined unless `stream` is a terminal; with an unknown total, the bar
  // appears once MIN_BYTES have gone by.
  static create ({ stream, total, label }) {
    if (!stream || !stream.isTTY) return undefined
    if (total !== undefined && total < MIN_BYTES) return undefined
    return new Progress(stream, total, label)
  }

  constructor (stream, total, label) {
    this.stream = stream
    this.total = total
    this.label = label
    this.done = 0
    this.started = Date.now()
    this.drawn = 0
  }

  meter () {
    return new Transform({
      transform: (chunk, encoding, callback) => {
        this.advance(chunk.length)
        callback(null, chunk)
      }
    })
  }

  advance (bytes) {
    this.done += bytes
    const now = Date.now()
    if (now - this.drawn >= REDRAW_MS && this.done >= Math.min(MIN_BYTES, this.total ?? MIN_BYTES)) {
      this.drawn = now
      this.#draw(now)
    }
  }

  line (now = Date.now()) {
    const seconds = Math.max((now - this.started) / 1000, 0.001)
    const rate = this.done / seconds
    const amount = this.total === undefined ? humanSize(this.done) : `${humanSize(this.done)} / ${humanSize(this.total)}`
    const eta = this.total === undefined ? '' : ` ETA ${duration((this.total - this.done) / rate)}`
    const text = `${amount} ${humanSize(rate)}/s${eta}`
    const width = Math.max(10, Math.min(40, (this.stream.columns || 80) - this.label.length - text.length - 6))
    if (this.total === undefined) return `${this.label} ${text}`
    const filled = Math.round(width * Math.min(1, this.done / Math.max(this.total, 1)))
    return `${this.label} [${'#'.repeat(filled)}${'-'.repeat(width - filled)}] ${text}`
  }

  #draw (now) {
    shown.add(this)
    this.stream.write(`\r${this.line(now)}\x1b[K`)
  }

  // Clears the bar, if drawn, so what follows on stderr starts on a clean line.
  finish () {
    if (shown.delete(this)) this.stream.write('\r\x1b[K')
  }
}

// Clears every bar on screen (a terminal's writes are synchronous: done on return).
function clearProgress () {
  for (const bar of shown) bar.finish()
}

// `source`, counted by the progress bar when there is one.
function metered (source, progress) {
  if (!progress) return source
  const meter = progress.meter()
  pipeline(source, meter).catch(() => {}) // a source error reaches the consumer through `meter`
  return meter
}

// Clears the progress bar once `promise` settles, before anything else is printed.
async function finished (promise, progress) {
  try {
    return await promise
  } finally {
    if (progress) progress.finish()
  }
}

module.exports = { Progress, metered, finished, MIN_BYTES, clearProgress }

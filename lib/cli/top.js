'use strict'

const kfs = require('../..')
const { view, rates, remember } = require('./top-view')
const screen = require('./screen')
const { write, println } = require('./output')

const QUIT_KEYS = ['q', 'Q', '\x03'] // Ctrl-C comes as a key in raw mode

// kfs top: the store's figures and operations, redrawn every second on a terminal; one
// snapshot otherwise (or with --once or --json). It never holds the store (metrics.storeOptions):
// its store reaches whichever process holds it, and where none does, the store's figures
// are read from a read-only open made for each sample, which a node may start beside.
async function top (store, io, { once, interval = 1 }) {
  const sample = sampler(store)
  if (!once && !io.json && io.stdout.isTTY) return live(store.location, io, sample, interval) // JSON is for programs: one snapshot
  const s = await sample()
  if (io.json) await println(io.stdout, JSON.stringify({ heldBy: s.held ?? null, metrics: s.metrics }))
  else await write(io.stdout, view({ location: store.location, ...s, at: new Date() }, io.stdout.columns || Infinity).join('\n') + '\n') // a file or pipe: lines whole
  return 0
}

top.storeOptions = () => ({ hold: false })

// A function resolving to { held, metrics }: the holder's process ID and figures, or
// undefined and the figures a read-only open finds.
function sampler (store) {
  return async () => {
    try {
      const metrics = await store.metrics()
      return { held: store.heldBy, metrics }
    } catch (err) {
      if (err.code !== 'ENOTCONN') throw err
      const readOnly = kfs(store.location, { readOnly: true, openAhead: false })
      try {
        const metrics = await readOnly.metrics()
        return { held: readOnly.heldBy === undefined || readOnly.heldBy === process.pid ? undefined : readOnly.heldBy, metrics }
      } finally {
        await readOnly.close()
      }
    }
  }
}

// Until q (or Ctrl-C) is pressed: a sample every `interval` seconds, rates over the last
// interval of one holder, 60 samples of history; redrawn on resize too. The terminal is
// given back on every way out.
async function live (location, io, sample, interval) {
  const { stdout, stdin } = io
  let quit
  const quitting = new Promise((resolve) => { quit = resolve })
  const onKey = (key) => { if (QUIT_KEYS.some((k) => String(key).includes(k))) quit() }
  let shown
  const redraw = () => { if (shown) screen.draw(stdout, view(shown, stdout.columns || 80, stdout.rows || 24)) }
  let before
  let history = {}
  screen.enter(stdout, stdin)
  if (stdin) stdin.on('data', onKey)
  stdout.on('resize', redraw)
  try {
    for (;;) {
      const at = Date.now()
      const s = await Promise.race([sample(), quitting])
      if (!s) break
      const same = before && s.held !== undefined && before.held === s.held
      const r = same ? rates(before.metrics.operations, s.metrics.operations, (at - before.at) / 1000) : {}
      history = s.held === undefined ? {} : remember(same ? history : {}, r)
      shown = { location, ...s, rates: r, history, interval, at: new Date(at) }
      redraw()
      before = { ...s, at }
      let timer
      const next = new Promise((resolve) => { timer = setTimeout(resolve, Math.max(0, interval * 1000 - (Date.now() - at)), true) })
      const going = await Promise.race([next, quitting.then(() => false)])
      clearTimeout(timer)
      if (!going) break
    }
  } finally {
    if (stdin) stdin.off('data', onKey)
    stdout.off('resize', redraw)
    screen.leave()
  }
  return 0
}

module.exports = { top }

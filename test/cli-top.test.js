'use strict'

// kfs top: the view's figures (rates, p99, sparklines), the live screen under a fake
// terminal and a real one (script(1)), and one snapshot without a terminal; beside a holder
// and on a store no process holds, never holding it.
const { expect } = require('chai')
const path = require('node:path')
const { PassThrough } = require('node:stream')
const { spawn, spawnSync } = require('node:child_process')
const kfs = require('..')
const { top } = require('../lib/cli/top')
const { rates, quantile, sparkline, view, remember } = require('../lib/cli/top-view')
const { useCli, BIN } = require('./cli-harness')
const { holder } = require('./share-harness')
const { within, scaled } = require('./helpers')

// A metrics() object with `operations`, the rest zero.
function figures (operations = {}) {
  return { files: 2, fileBytes: 2048, capacityBytes: 1, diskBytes: 4096, reclaimableBytes: 0, reserveBytes: 16, shards: 4, shardsOpen: 3, shardsUncounted: 0, clients: 1, memory: { budget: 100, write: 1, readahead: 2, memtables: 3 }, operations }
}

// An operation's figures: `count` calls, `buckets` cumulative over DURATION_BUCKETS and +Inf.
function op (count, buckets) {
  return { count, errors: {}, seconds: { sum: 0, buckets } }
}

const BUCKETS = kfs.DURATION_BUCKETS.length + 1
const cumulative = (at, n) => Array.from({ length: BUCKETS }, (_, i) => (i >= at ? n : 0))

// A fake terminal: stdout a TTY of `columns` and `rows`, stdin one in raw mode; `screen` is all written.
function terminal (columns = 100, rows = 30) {
  const stdout = Object.assign(new PassThrough(), { isTTY: true, columns, rows })
  const stdin = Object.assign(new PassThrough(), { isTTY: true, raw: false, setRawMode (on) { this.raw = on } })
  const t = { stdout, stdin, screen: '' }
  stdout.on('data', (d) => { t.screen += d })
  t.frames = () => t.screen.split('\x1b[H').slice(1)
  return t
}

async function until (check, what, ms = 20000) {
  return within((async () => { while (!check()) await new Promise((resolve) => setTimeout(resolve, 20)) })(), scaled(ms), what)
}

describe('kfs top', function () {
  describe('its view', () => {
    it('gives calls per second and a p99 from two samples\' histograms', () => {
      const before = { readFile: op(10, cumulative(2, 10)) }
      const after = { readFile: op(110, cumulative(2, 10).map((n, i) => n + (i >= 4 ? 99 : 0) + (i >= 9 ? 1 : 0))), stat: op(0, cumulative(0, 0)) }
      const r = rates(before, after, 2)
      expect(r).to.have.keys(['readFile']) // stat had no call
      expect(r.readFile.calls).to.equal(100)
      expect(r.readFile.perSecond).to.equal(50)
      expect(r.readFile.p99).to.equal(kfs.DURATION_BUCKETS[4]) // 99 of 100 within the 5th bound
      expect(quantile(cumulative(BUCKETS - 1, 5), 0.99)).to.equal(Infinity)
    })

    it('draws a sparkline scaled to its largest value, and keeps a minute of history', () => {
      expect(sparkline([0, 1, 2, 4])).to.equal('▁▂▄█')
      expect(sparkline([0, 0])).to.equal('▁▁')
      let history = {}
      for (let i = 0; i < 70; i++) history = remember(history, { readFile: { perSecond: i } })
      expect(history.readFile).to.have.length(60)
      expect(history.total.at(-1)).to.equal(69)
    })

    it('fits in the height, saying how many lines more there were', () => {
      const operations = Object.fromEntries(kfs.DURATION_BUCKETS.map((_, i) => [`method${i}`, op(i + 1, cumulative(i, i + 1))]))
      const r = rates({}, operations, 1)
      const state = { location: '/s', held: 1, metrics: figures(operations), rates: r, history: remember({}, r), at: new Date(0) }
      expect(view(state, 100)).to.have.length.above(20)
      const lines = view(state, 100, 12)
      expect(lines).to.have.length(12)
      expect(lines[0]).to.match(/^kfs top {2}\/s/)
      expect(lines[11]).to.match(/^… \d+ lines more: a taller terminal shows them$/)
      expect(+lines[11].match(/\d+/)[0]).to.equal(view(state, 100).length - 11)
      expect(view(state, 100, 0)).to.have.length(1)
    })

    it('fits every line in the width, and says where no process holds the store', () => {
      const lines = view({ location: '/a/store/with/a/rather/long/path', held: undefined, metrics: figures(), rates: {}, history: {}, at: new Date(0) }, 30)
      expect(lines.every((line) => line.length <= 30)).to.equal(true)
      expect(lines[1]).to.match(/^no process holds the store/)
      const snapshot = view({ location: '/s', held: 42, metrics: figures({ stat: op(3, cumulative(1, 3)) }), at: new Date(0) }, 120)
      expect(snapshot.join('\n')).to.match(/held by process 42\n/).and.to.match(/^stat +3 +p99 ≤ 0\.1 ms$/m)
    })
  })

  describe('the command', () => {
    const c = useCli()

    it('under a fake terminal: redraws every second beside a holder, shows its calls, quits on q and gives the terminal back', async () => {
      const dir = path.join(c.t.dir, 'store')
      const held = kfs(dir)
      await held.writeFile('a', 'one')
      const watched = kfs(dir, top.storeOptions())
      const t = terminal()
      try {
        const running = top(watched, { stdout: t.stdout, stdin: t.stdin }, {})
        await until(() => t.frames().length >= 1, 'the first frame')
        expect(t.stdin.raw).to.equal(true)
        for (let i = 0; i < 20; i++) await held.writeFile(`f${i}`, 'x')
        // A frame drawn once every write was made (one drawn between two writes shows fewer).
        const done = () => { const frame = t.frames().at(-1) || ''; return /files 21 /.test(frame) && /^writeFile +[\d.]+ /m.test(frame) }
        await until(done, 'a frame with all the writes')
        expect(t.frames().at(-1)).to.match(new RegExp(`held by process ${process.pid}; q quits`))
        t.stdin.write('q')
        expect(await within(running, scaled(15000), 'quitting')).to.equal(0)
        expect(t.screen.startsWith('\x1b[?1049h\x1b[?25l')).to.equal(true)
        expect(t.screen.endsWith('\x1b[?25h\x1b[?1049l')).to.equal(true)
        expect(t.stdin.raw).to.equal(false)
      } finally {
        await watched.close()
        await held.close()
      }
    })

    it('under a fake terminal: draws no more lines than its rows, and leaves a stdin that is not a terminal paused', async () => {
      let calls = 0 // a holder whose every method is called once more between two samples
      const operations = () => { calls++; return Object.fromEntries(kfs.DURATION_BUCKETS.map((_, i) => [`method${i}`, op(calls, cumulative(i, calls))])) }
      const store = { location: '/s', heldBy: 1, metrics: async () => figures(operations()) }
      const t = terminal(100, 10)
      const stdin = new PassThrough() // a pipe: `cmd | kfs top`
      const running = top(store, { stdout: t.stdout, stdin }, {})
      try {
        await until(() => t.frames().length >= 2, 'a frame with rates')
        const lines = t.frames()[1].replace(/\x1b\[[JK]/g, '').split('\r\n') // eslint-disable-line no-control-regex
        expect(lines).to.have.length(10)
        expect(lines[9]).to.match(/lines more/)
      } finally {
        stdin.write('q')
        expect(await within(running, scaled(15000), 'quitting')).to.equal(0)
      }
      expect(stdin.readableFlowing).to.equal(false)
    })

    it('under a fake terminal: with no holder, shows the store\'s figures, then the holder that starts, which it never kept out', async () => {
      await c.cli(['put'], { input: 'one' })
      const watched = kfs(c.db, top.storeOptions())
      const t = terminal()
      const running = top(watched, { stdout: t.stdout, stdin: t.stdin }, {})
      try {
        await until(() => t.frames().length >= 1, 'the first frame')
        expect(t.frames()[0]).to.match(/no process holds the store/).and.to.match(/files 1 /)
        const started = await holder(c.db)
        try {
          await until(() => new RegExp(`held by process ${started.child.pid}`).test(t.frames().at(-1)), 'the holder shown')
        } finally {
          await started.stop()
        }
      } finally {
        t.stdin.write('\x03') // Ctrl-C, as raw mode gives it
        expect(await within(running, scaled(15000), 'quitting')).to.equal(0)
        await watched.close()
      }
    })

    it('under a fake terminal: goes on as its holder is killed and another starts', async () => {
      await c.cli(['put'], { input: 'one' })
      const watched = kfs(c.db, top.storeOptions())
      const t = terminal()
      let first = await holder(c.db)
      const running = top(watched, { stdout: t.stdout, stdin: t.stdin }, {})
      let failed
      running.catch((err) => { failed = err })
      const shown = (re) => until(() => failed || re.test(t.frames().at(-1) || ''), String(re))
      try {
        await shown(new RegExp(`held by process ${first.child.pid}`))
        await first.kill()
        await shown(/no process holds the store/)
        first = await holder(c.db)
        await shown(new RegExp(`held by process ${first.child.pid}`))
        await first.stop()
        await shown(/no process holds the store/)
        expect(failed).to.equal(undefined)
      } finally {
        t.stdin.write('q')
        await within(running, scaled(15000), 'quitting').catch(() => {})
        await first.stop()
        await watched.close()
      }
    })

    it('samples every --interval seconds, its sparkline spanning 60 of them; an interval out of range is a usage error', async () => {
      let calls = 0
      const store = { location: '/s', heldBy: 1, metrics: async () => figures({ stat: op(++calls, cumulative(0, calls)) }) }
      const t = terminal()
      const running = top(store, { stdout: t.stdout, stdin: t.stdin }, { interval: 0.1 })
      try {
        await until(() => t.frames().length >= 5, 'five frames', 2500) // 4 s at one a second
        const frame = t.frames().at(-1)
        expect(frame).to.match(/p99 +last 6 s\x1b/) // eslint-disable-line no-control-regex
        expect(+frame.match(/^stat +([\d.]+) /m)[1]).to.be.above(2) // a call a sample: about 10 per second
      } finally {
        t.stdin.write('q')
        expect(await within(running, scaled(15000), 'quitting')).to.equal(0)
      }
      for (const bad of ['0', '0.05', 'x', '3601']) {
        const r = await c.cli(['top', '--interval', bad])
        expect(r.code, bad).to.equal(2)
        expect(r.stderr).to.match(/from 0\.1 to 3600/)
      }
    })

    it('with --json on a terminal: one snapshot, as JSON', async () => {
      const store = { location: '/s', heldBy: 7, metrics: async () => figures() }
      const t = terminal()
      expect(await within(top(store, { stdout: t.stdout, stdin: t.stdin, json: true }, {}), scaled(5000), 'the snapshot')).to.equal(0)
      expect(JSON.parse(t.screen)).to.deep.equal({ heldBy: 7, metrics: figures() })
    })

    it('without a terminal: lines whole, however long', async () => {
      const location = `/${'long/'.repeat(40)}store`
      const store = { location, heldBy: 1, metrics: async () => figures() }
      const stdout = new PassThrough() // a file or a pipe: no columns
      let text = ''
      stdout.on('data', (d) => { text += d })
      expect(await top(store, { stdout }, {})).to.equal(0)
      expect(text.split('\n')[0]).to.include(location).and.not.to.include('…')
    })

    it('without a terminal: one snapshot, or JSON, and exit 0; a missing store is ENOENT', async () => {
      await c.cli(['put'], { input: 'one' })
      const held = await holder(c.db)
      try {
        const text = await c.cli(['top'])
        expect(text.code).to.equal(0)
        expect(text.stdout.toString()).to.match(new RegExp(`held by process ${held.child.pid}\n`)).and.not.to.match(/\x1b/) // eslint-disable-line no-control-regex
        const json = JSON.parse((await c.cli(['top', '--json'])).stdout)
        expect([json.heldBy, json.metrics.files]).to.deep.equal([held.child.pid, 1])
      } finally {
        await held.stop()
      }
      expect((await c.cli(['top'])).stdout.toString()).to.match(/no process holds the store/)
      c.db = path.join(c.t.dir, 'none')
      const missing = await c.cli(['top'])
      expect(missing.code).to.equal(1)
      expect(missing.stderr).to.match(/there is no kfs store/)
    })

    it('on a real terminal (script(1)): draws and quits on q', async function () {
      if (spawnSync('script', ['--version']).error) return this.skip() // util-linux's script is missing
      await c.cli(['put'], { input: 'one' })
      const child = spawn('script', ['-qfec', `${process.execPath} ${BIN} top`, '/dev/null'], { env: { ...process.env, KFS_DB: c.db }, stdio: ['pipe', 'pipe', 'inherit'] })
      let out = ''
      child.stdout.on('data', (d) => { out += d })
      await until(() => out.includes('files 1 '), 'the first frame')
      child.stdin.write('q')
      const code = await within(new Promise((resolve) => child.once('exit', resolve)), scaled(10000), 'quitting')
      expect(code).to.equal(0)
      expect(out).to.include('\x1b[?1049h').and.to.include('\x1b[?1049l')
    })
  })
})

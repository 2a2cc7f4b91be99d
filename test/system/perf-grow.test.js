'use strict'

const { expect } = require('chai')
const fs = require('node:fs')
const path = require('node:path')
const { scaled } = require('../helpers')
const { usePerf } = require('./perf-harness')
const { HEADER, ENGINES, MEASURES } = require('../../perf/grow')
const { machineOf } = require('../../perf/harness/script')

const NAMES = ['kfs', 'one raw LevelDB', 'files (temp file, rename)']
const escape = (s) => s.replace(/[+().]/g, '\\$&')

// A store grown through checkpoints, once at tiny sizes: every engine measured at every
// checkpoint, in the CSV, the report and the charts.
describe('perf/grow.js', function () {
  // Three engines, each in a process of its own, two checkpoints: about 5 s on a
  // machine at load 6.
  this.timeout(scaled(60000))
  const perf = usePerf()
  const tmp = perf.tmp
  const run = (argv) => perf.run('grow.js', argv)

  it('--quick writes a CSV row per engine and checkpoint, a table and chart per measure, and leaves no store behind', async () => {
    const stores = path.join(tmp.dir, 'stores')
    const out = path.join(tmp.dir, 'out')
    const { stdout, stderr } = await run(['--quick', '--dir', stores, '--out', out])
    const charts = MEASURES.map((m) => `grow-${m.id}.svg`)
    expect(stderr).to.contain(`wrote grow.csv, grow.md, ${charts.join(', ')} to ${out}`)
    expect(fs.readdirSync(out).sort()).to.deep.equal(['grow.csv', 'grow.md', ...charts].sort())
    expect(fs.readdirSync(stores)).to.deep.equal([])

    const [header, ...lines] = fs.readFileSync(path.join(out, 'grow.csv'), 'utf8').trim().split('\n')
    expect(header).to.equal(HEADER)
    const columns = header.split(',')
    const rows = lines.map((line) => Object.fromEntries(line.split(',').map((cell, i) => [columns[i], cell])))
    expect(rows.map((r) => `${r.engine} ${r.pieces}`).sort()).to.deep.equal(ENGINES.flatMap((e) => [`${e} 60`, `${e} 150`]).sort())
    for (const r of rows) {
      const of = `${r.engine} at ${r.pieces}`
      expect(Number(r.segment_pieces), of).to.equal(r.pieces === '60' ? 60 : 90)
      expect(Number(r.listed), of).to.equal(Number(r.pieces))
      expect(Number(r.reads), of).to.equal(50)
      expect(Number(r.after_reopen_reads), of).to.equal(40)
      for (const name of ['upload_pieces_per_s', 'upload_mib_per_s', 'reads_per_s', 'after_reopen_per_s', 'after_reopen_over_warm', 'open_ms', 'first_read_ms', 'list_ms', 'disk_bytes']) {
        expect(Number(r[name]), `${of}: ${name}`).to.be.above(0)
      }
      expect(Number(r.upload_mib_per_s), of).to.be.closeTo(Number(r.upload_pieces_per_s) * 4096 / 2 ** 20, 0.01)
      expect(Number(r.live_bytes), of).to.equal(Number(r.pieces) * 4096)
      expect(Number(r.disk_over_live), of).to.be.closeTo(Number(r.disk_bytes) / Number(r.live_bytes), 0.001)
      const phases = ['upload', 'download', 'reopen', 'list'].map((p) => Number(r[`peak_anon_${p}_bytes`]))
      for (const peak of phases) expect(peak, of).to.be.above(0)
      expect(Number(r.peak_anon_bytes), of).to.equal(Math.max(...phases))
      expect(Number(r.peak_rss_bytes), of).to.be.at.least(Number(r.peak_anon_bytes))
      expect(Number(r.peak_fds), of).to.be.above(0)
    }

    const report = fs.readFileSync(path.join(out, 'grow.md'), 'utf8')
    expect(stdout.trim()).to.equal(report.trim())
    expect(report).to.contain('--quick: tiny sizes, measures nothing')
    expect(report).to.match(/Load average \(1, 5, 15 min\) at the start: [\d.]+ [\d.]+ [\d.]+; at the end: [\d.]+ [\d.]+ [\d.]+\./)
    for (const m of MEASURES) {
      const title = `## ${m.title} (${m.unit}; ${m.better} is better)`
      expect(report, title).to.contain(title)
      const section = report.slice(report.indexOf(title)).split('\n## ')[0]
      expect(section, title).to.contain('| engine | 60 | 150 |')
      // One raw LevelDB's figures alone; the others' with their ratio to it, unless the
      // measure is a ratio to something else.
      const ratio = m.ratio === false ? '' : ' \\([\\d,.]+x\\)'
      expect(section, title).to.match(/^\| one raw LevelDB \| [\d,.]+ \| [\d,.]+ \|$/m)
      for (const name of ['kfs', 'files (temp file, rename)']) {
        expect(section, `${title} ${name}`).to.match(new RegExp(`^\\| ${escape(name)} \\| [\\d,.]+${ratio} \\| [\\d,.]+${ratio} \\|$`, 'm'))
      }
      expect(section, title).to.contain(`](grow-${m.id}.svg)`)
    }
    for (const line of report.split('\n').filter((l) => l.startsWith('|'))) expect(line.length, line).to.be.at.most(100)

    for (const file of charts) {
      const svg = fs.readFileSync(path.join(out, file), 'utf8')
      expect(svg, file).to.match(/(higher|lower) is better/)
      expect(svg, file).to.contain('pieces held (log scale)').and.contain(machineOf(stores)).and.contain('--quick: tiny sizes, measures nothing')
      for (const name of NAMES) expect(svg, `${file} ${name}`).to.match(new RegExp(`<text class="legend" [^>]*>${escape(name)}</text>`))
      expect(svg.match(/<circle /g), `${file}: a point per engine and checkpoint`).to.have.length(6)
    }

    // Drawn again from the CSV, given the machine the run names: the same charts.
    const again = path.join(tmp.dir, 'again')
    await run(['--from-csv', path.join(out, 'grow.csv'), '--out', again, '--quick', '--machine', machineOf(stores)])
    for (const file of charts) expect(fs.readFileSync(path.join(again, file), 'utf8'), file).to.equal(fs.readFileSync(path.join(out, file), 'utf8'))
  })

  it('refuses to start without the disk the run needs: exit 1, one line, nothing left behind', async () => {
    const stores = path.join(tmp.dir, 'stores')
    const err = await run(['--checkpoints', '1000000', '--size', '1G', '--dir', stores]).then(() => undefined, (e) => e)
    expect(err).to.be.an('error')
    expect(err.code).to.equal(1)
    expect(err.stderr).to.match(/^perf\/grow\.js: \S+kfs-grow-\S+ has [\d,]+ MiB free; this run needs about [\d,]+ MiB\n$/)
    expect(fs.readdirSync(stores)).to.deep.equal([])
  })

  it('--help prints the usage; bad arguments exit with 2 and a message', async () => {
    const { stdout } = await run(['--help'])
    expect(stdout).to.contain('npm run benchmark:grow -- [--size BYTES] [--checkpoints LIST]')
    expect(stdout).to.contain('10000,100000,1000000)').and.contain('kfs,leveldb,files)')
    for (const [argv, message] of [
      [['--checkpoints', '100,50'], '--checkpoints must increase, got 100,50'],
      [['--checkpoints', '10,0'], '--checkpoints takes a positive integer'],
      [['--engines', 'kfs,vanilla'], '--engines: unknown value vanilla'],
      [['--size', 'big'], '--size takes a size']
    ]) {
      const err = await run(argv).then(() => undefined, (e) => e)
      expect(err, argv.join(' ')).to.be.an('error')
      expect(err.code).to.equal(2)
      expect(err.stderr).to.contain(message)
    }
  })
})

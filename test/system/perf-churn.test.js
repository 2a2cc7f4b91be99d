'use strict'

const { expect } = require('chai')
const fs = require('node:fs')
const path = require('node:path')
const { scaled } = require('../helpers')
const { usePerf } = require('./perf-harness')
const { HEADER, MODES } = require('../../perf/churn')

// Uploads and expiry together, once at tiny sizes: both engines measured, in the CSV and
// the report, with the ratio the issue asks for.
describe('perf/churn.js', function () {
  // Two engines, each in a process of its own, for rounds of fixed length: 43 s at load
  // 10, and past 55 s beside the other test files at load 18.
  this.timeout(scaled(180000))
  const perf = usePerf()
  const tmp = perf.tmp
  const run = (argv) => perf.run('churn.js', argv)

  it('--quick writes a CSV row per engine, a report with the ratio line, and leaves no store behind', async () => {
    const stores = path.join(tmp.dir, 'stores')
    const out = path.join(tmp.dir, 'out')
    const { stdout, stderr } = await run(['--quick', '--dir', stores, '--out', out])
    expect(stderr).to.contain(`wrote churn.csv and churn.md to ${out}`)
    expect(fs.readdirSync(out).sort()).to.deep.equal(['churn.csv', 'churn.md'])
    expect(fs.readdirSync(stores)).to.deep.equal([])

    const [header, ...lines] = fs.readFileSync(path.join(out, 'churn.csv'), 'utf8').trim().split('\n')
    expect(header).to.equal(HEADER)
    const columns = header.split(',')
    const rows = lines.map((line) => Object.fromEntries(line.split(',').map((cell, i) => [columns[i], cell])))
    expect(rows.map((r) => r.engine).sort()).to.deep.equal([...MODES.unlink].sort())
    for (const r of rows) {
      expect(Number(r.upload_pieces_per_s), r.engine).to.be.above(0)
      expect(Number(r.p99_ms)).to.be.at.least(Number(r.p50_ms))
      // Each upload was followed by an unlink of the oldest piece: --pieces stayed live.
      expect(r.collected).to.equal(r.uploaded)
      for (const disk of ['disk_preload_bytes', 'disk_end_bytes', 'disk_idle_bytes']) expect(Number(r[disk]), disk).to.be.above(0)
    }

    const report = fs.readFileSync(path.join(out, 'churn.md'), 'utf8')
    expect(stdout.trim()).to.equal(report.trim())
    expect(report).to.contain('--quick: tiny sizes, measures nothing')
    expect(report).to.match(/Load average \(1, 5, 15 min\) at the start: [\d.]+ [\d.]+ [\d.]+; at the end: [\d.]+ [\d.]+ [\d.]+\./)
    for (const name of ['kfs \\(reclaim: true, the default\\)', 'kfs, reclaim: false']) {
      expect(report).to.match(new RegExp(`^\\| ${name} \\| [\\d,]+ \\| [\\d, ]+( \\| [\\d,.]+){4} \\|$`, 'm'))
      expect(report).to.match(new RegExp(`^\\| ${name}( \\| [\\d,.]+%){3} \\|$`, 'm'))
    }
    for (const line of report.split('\n').filter((l) => l.startsWith('|'))) expect(line.length, line).to.be.at.most(100)
    expect(report).to.match(/^Upload pieces\/s with reclaiming \/ without: [\d.]+ \(median; rounds: [\d.]+\)\.$/m)
  })

  it('--expire: pieces expire instead of being unlinked; collected by one engine, not the other; the ratio line', async () => {
    const stores = path.join(tmp.dir, 'stores')
    const out = path.join(tmp.dir, 'out')
    const { stdout } = await run(['--quick', '--expire', '--dir', stores, '--out', out])
    expect(fs.readdirSync(stores)).to.deep.equal([])
    const [header, ...lines] = fs.readFileSync(path.join(out, 'churn.csv'), 'utf8').trim().split('\n')
    expect(header).to.equal(HEADER)
    const columns = header.split(',')
    const rows = Object.fromEntries(lines.map((line) => Object.fromEntries(line.split(',').map((cell, i) => [columns[i], cell]))).map((r) => [r.engine, r]))
    expect(Object.keys(rows).sort()).to.deep.equal([...MODES.expire].sort())
    const [collecting, none] = MODES.expire.map((e) => rows[e])
    // --ttl 1 over a churn of 2 s: the store collected pieces by itself; with every expiry
    // an hour on, none fell due.
    expect(Number(collecting.collected)).to.be.above(0).and.at.most(Number(collecting.uploaded) + 100)
    expect(none.collected).to.equal('0')
    // Live: the pieces whose expiry is ahead; all of them when none falls due.
    expect(Number(collecting.live_end_bytes)).to.be.below(Number(none.live_end_bytes))
    expect(Number(none.live_end_bytes)).to.equal((Number(none.uploaded) + 100) * 4096)
    for (const r of [collecting, none]) expect(Number(r.upload_pieces_per_s), r.engine).to.be.above(0)
    expect(stdout).to.contain('# Churn with expiry: pieces of 4,096 bytes expiring 1 s after their upload')
    expect(stdout).to.match(/^\| kfs, pieces expiring, collected \| [\d,]+ \| [\d,]+ \| [\d.]+ \| [\d.]+ \| [\d,]+ \| [1-9][\d,]* \|$/m)
    expect(stdout).to.match(/^\| kfs, nothing due \(expiry 1 h on\) \| [\d,]+ \| [\d,.]+% \| [\d,]+ \| [\d,.]+% \| [\d.]+ MiB \|$/m)
    for (const line of stdout.split('\n').filter((l) => l.startsWith('|'))) expect(line.length, line).to.be.at.most(100)
    expect(stdout).to.match(/^Upload pieces\/s with collection \/ without: [\d.]+ \(median; rounds: [\d.]+\)\.$/m)
  })

  it('--help prints the usage; bad arguments exit with 2 and a message', async () => {
    const { stdout } = await run(['--help'])
    expect(stdout).to.contain('npm run benchmark:churn -- [--size BYTES]')
    expect(stdout).to.contain('--seconds S')
    expect(stdout).to.contain('--expire').and.contain('--ttl S')
    for (const [argv, message] of [[['--seconds', '0'], '--seconds takes a positive integer'], [['--bogus'], 'unknown argument --bogus']]) {
      const err = await run(argv).then(() => undefined, (e) => e)
      expect(err, argv.join(' ')).to.be.an('error')
      expect(err.code).to.equal(2)
      expect(err.stderr).to.contain(message)
    }
  })
})

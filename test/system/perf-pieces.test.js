'use strict'

const { expect } = require('chai')
const fs = require('node:fs')
const path = require('node:path')
const { scaled } = require('../helpers')
const { usePerf } = require('./perf-harness')
const { HEADER, ENGINES, PHASES } = require('../../perf/pieces')
const { KEEPS_SPACE } = require('../../perf/harness/piece-engines')
const { machineOf } = require('../../perf/harness/script')

// Storj's piece workload, once at tiny sizes: every engine and phase measured, in the
// CSV, the report and the chart.
describe('perf/pieces.js', function () {
  // Seven engines, each in a process of its own: about 15 s on a quiet machine, and
  // 55 s with the other test files beside it on a machine at load 9.
  this.timeout(scaled(180000))
  const perf = usePerf()
  const tmp = perf.tmp
  const run = (argv) => perf.run('pieces.js', argv)

  it('--quick writes a CSV row per engine and phase, a report and a chart, and leaves no store behind', async () => {
    const stores = path.join(tmp.dir, 'stores')
    const out = path.join(tmp.dir, 'out')
    const { stdout, stderr } = await run(['--quick', '--engines', ENGINES.join(','), '--dir', stores, '--out', out])
    expect(stderr).to.contain(`wrote pieces.csv, pieces.md, pieces.svg and pieces-ratio.svg to ${out}`)
    expect(fs.readdirSync(out).sort()).to.deep.equal(['pieces-ratio.svg', 'pieces.csv', 'pieces.md', 'pieces.svg'])
    expect(fs.readdirSync(stores)).to.deep.equal([])
    expect(stderr, 'the operator beside kfs-operator ran').to.match(/the operator ran kfs list and kfs stat [1-9]\d* times/)
    expect(stdout).to.contain("## kfs, an operator beside it: pieces/s over kfs's alone")

    const [header, ...lines] = fs.readFileSync(path.join(out, 'pieces.csv'), 'utf8').trim().split('\n')
    expect(header).to.equal(HEADER)
    const columns = header.split(',')
    const rows = lines.map((line) => Object.fromEntries(line.split(',').map((cell, i) => [columns[i], cell])))
    expect(ENGINES).to.include('raw-kfs')
    expect(rows.map((r) => `${r.engine} ${r.phase}`).sort()).to.deep.equal(ENGINES.flatMap((e) => PHASES.map((p) => `${e} ${p}`)).sort())
    for (const r of rows) {
      expect(Number(r.pieces_per_s), `${r.engine} ${r.phase}`).to.be.above(0)
      expect(Number(r.p99_ms)).to.be.at.least(Number(r.p50_ms))
      expect(Number(r.peak_rss_bytes)).to.be.at.least(Number(r.peak_anon_bytes)).and.above(0)
      expect(Number.isInteger(Number(r.gc_full)) && Number(r.gc_ms) >= 0, `${r.engine} ${r.phase} gc_full ${r.gc_full}, gc_ms ${r.gc_ms}`).to.equal(true)
      expect(Number(r.peak_fds)).to.be.above(0)
      // Disk after idle and close only for collect, once the pieces are gone.
      expect(r.disk_idle_bytes === '').to.equal(r.phase !== 'collect')
      expect(r.disk_closed_bytes === '').to.equal(r.phase !== 'collect')
      // The disk back to 10% of the pieces' bytes: only after collect, never before its
      // removals ended, and never for the engines that give no space back.
      if (r.phase !== 'collect' || KEEPS_SPACE.includes(r.engine)) expect(r.disk_back_s, `${r.engine} ${r.phase}`).to.equal('')
      else if (r.disk_back_s !== '') expect(Number(r.disk_back_s), r.engine).to.be.at.least(Number(r.seconds) - 0.001)
    }
    // Files give the space back as they unlink: within --settle even at tiny sizes.
    expect(Number(rows.find((r) => r.engine === 'files' && r.phase === 'collect').disk_back_s)).to.be.above(0)
    // kfs-expire's collect: the store's own (it ends once every piece is collected), no
    // call per piece.
    const expired = rows.find((r) => r.engine === 'kfs-expire' && r.phase === 'collect')
    expect([expired.workers, expired.p50_ms, expired.p99_ms]).to.deep.equal(['0', '', ''])

    const report = fs.readFileSync(path.join(out, 'pieces.md'), 'utf8')
    expect(stdout.trim()).to.equal(report.trim())
    expect(report).to.contain('--quick: tiny sizes, measures nothing')
    expect(report).to.match(/Load average \(1, 5, 15 min\) at the start: [\d.]+ [\d.]+ [\d.]+; at the end: [\d.]+ [\d.]+ [\d.]+\./)
    const names = ['kfs', 'kfs, pieces expiring', 'kfs, sync: true', 'files (temp file, rename)', 'files + fsync', 'one raw LevelDB', "raw LevelDBs doing kfs's work (floor)"]
    for (const title of ['## Upload (5 in flight)', '## Download (5 in flight)', '## Collect (1 in flight)', '## Disk: ']) {
      const section = report.slice(report.indexOf(title)).split('\n## ')[0]
      expect(report, title).to.contain(title)
      for (const name of names) expect(section, `${title} ${name}`).to.match(new RegExp(`^\\| ${name.replace(/[+().]/g, '\\$&')} \\| [\\d,.]+`, 'm'))
    }
    expect(report).to.contain('| / floor | / one raw LevelDB |')
    const download = report.slice(report.indexOf('## Download')).split('\n## ')[0]
    expect(download).to.match(/^\| kfs \| [\d,]+ \| [\d,]+(-[\d,]+)? \| [\d,.]+ \| [\d.]+ \| [\d.]+ \| [\d,]+ \| [\d,]+ \|$/m) // pieces/s, slowest-fastest round, MiB/s, p50, p99, full GCs, GC ms
    expect(download).to.match(/^\| kfs( \| [\d,.]+){7} \|$/m) // four ratios, three peaks
    expect(report).to.contain('n = 1 < 5: no statistics')
    const back = report.slice(report.indexOf('## Collect: wall time until the disk is back to 10% of the live bytes')).split('\n## ')[0]
    for (const name of ['kfs', 'kfs, pieces expiring', 'files (temp file, rename)']) expect(back, name).to.match(new RegExp(`^\\| ${name.replace(/[+().]/g, '\\$&')} \\| [\\d.]+ \\| ([\\d.]+|–) \\| ([\\d.]+|–) \\|$`, 'm'))
    expect(back).not.to.contain('one raw LevelDB |')
    expect(back).to.match(/^kfs unlinking the pieces one by one over kfs collecting them by expiry, wall time to the disk back: ([\d.]+|–) \(rounds: ([\d.]+|–)\); the target is at least 10\.$/m)
    for (const line of report.split('\n').filter((l) => l.startsWith('|'))) expect(line.length, line).to.be.at.most(100)
    expect(report).to.contain('The floor ("raw LevelDBs doing kfs\'s work (floor)") is the least kfs can do through LevelDB')

    const svg = fs.readFileSync(path.join(out, 'pieces.svg'), 'utf8')
    expect(svg).to.contain('higher is better')
    for (const name of names) expect(svg).to.match(new RegExp(`<text class="legend" [^>]*>${name.replace(/[+().]/g, '\\$&')}</text>`))
    for (const phase of PHASES) expect(svg).to.contain(`>${phase}</text>`)

    expect(svg).to.contain(machineOf(stores)).and.contain('median of n = 1 round').and.contain('whiskers: slowest and')
    const ratios = fs.readFileSync(path.join(out, 'pieces-ratio.svg'), 'utf8')
    expect(ratios).to.contain('higher is better for kfs').and.contain('class="reference"').and.contain('1.0: as fast')
    for (const name of names.filter((n) => !n.startsWith('kfs'))) expect(ratios).to.contain(`>kfs / ${name}</text>`)

    // Drawn again from the CSV, given the machine the run names: the same charts.
    const again = path.join(tmp.dir, 'again')
    await run(['--from-csv', path.join(out, 'pieces.csv'), '--out', again, '--quick', '--machine', machineOf(stores)])
    for (const file of ['pieces.svg', 'pieces-ratio.svg']) expect(fs.readFileSync(path.join(again, file), 'utf8'), file).to.equal(fs.readFileSync(path.join(out, file), 'utf8'))
    // Without it, they say the machine is not recorded.
    await run(['--from-csv', path.join(out, 'pieces.csv'), '--out', again, '--quick'])
    expect(fs.readFileSync(path.join(again, 'pieces.svg'), 'utf8')).to.contain('machine not recorded')
  })

  it('--help prints the usage; bad arguments exit with 2 and a message', async () => {
    const { stdout } = await run(['--help'])
    expect(stdout).to.contain('npm run benchmark:pieces -- [--size BYTES]')
    expect(stdout).to.contain('--rounds N')
    expect(stdout).to.contain('--settle MS')
    for (const [argv, message] of [[['--pieces', '0'], '--pieces takes a positive integer'], [['--size', 'big'], '--size takes a size'], [['--bogus'], 'unknown argument --bogus']]) {
      const err = await run(argv).then(() => undefined, (e) => e)
      expect(err, argv.join(' ')).to.be.an('error')
      expect(err.code).to.equal(2)
      expect(err.stderr).to.contain(message)
    }
  })
})

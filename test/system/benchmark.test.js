'use strict'

const { expect } = require('chai')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { parseArgs, HEADER } = require('../../perf/benchmark')
const { parseCsv, summarize, report } = require('../../perf/report')
const { machineOf } = require('../../perf/harness/script')
const { scaled } = require('../helpers')
const { usePerf } = require('./perf-harness')


describe('npm run benchmark', function () {
  this.timeout(scaled(120000))
  const { tmp: t, run } = usePerf()

  it('--quick writes a CSV of every operation, engine, size and trial, a report and charts marked as a smoke run, then cleans up', async () => {
    const quick = path.join(t.dir, 'quick')
    const csv = path.join(quick, 'benchmark.csv')
    const dbs = path.join(t.dir, 'dbs')
    await run('benchmark.js', ['--quick', '--out', quick, '--dir', dbs])
    const text = fs.readFileSync(csv, 'utf8')
    expect(text.split('\n')[0]).to.equal(HEADER)
    const rows = parseCsv(text)
    expect(rows).to.have.length(2 * 2 * 3 * 3) // trials x engines x sizes x operations
    for (const row of rows) {
      expect(row.trial).to.be.oneOf([1, 2])
      expect(row.engine).to.be.oneOf(['kfs', 'vanilla'])
      expect(row.operation).to.be.oneOf(['write', 'read', 'unlink'])
      expect(row.size_bytes).to.be.oneOf([1, 2, 4].map((m) => m * 1024 * 1024))
      expect(row.ms).to.be.above(0)
      expect(row.mib_per_s === '' ? row.operation : Number(row.mib_per_s)).to.satisfy((v) => v === 'unlink' || v > 0)
      expect(row.shard).to.be.within(0, 255)
      if (row.engine === 'vanilla') expect(row.shard).to.equal(0)
      expect(row.db_disk_bytes).to.be.above(0)
      expect(Date.parse(row.timestamp)).to.be.above(0)
    }
    // Engines are interleaved: trial 1 starts with kfs, trial 2 with vanilla.
    expect(rows.filter((r) => r.trial === 1)[0].engine).to.equal('kfs')
    expect(rows.filter((r) => r.trial === 2)[0].engine).to.equal('vanilla')
    expect(fs.readdirSync(dbs)).to.deep.equal([])
    // The run names its machine, and says on every chart that it measures nothing.
    const machine = machineOf(dbs)
    expect(fs.readFileSync(path.join(quick, 'report.md'), 'utf8')).to.contain(`; ${machine}. **--quick: tiny sizes, measures nothing.**`)
    const drawn = fs.readdirSync(path.join(quick, 'charts'))
    expect(drawn).to.have.length.above(3)
    for (const chart of drawn) {
      const svg = fs.readFileSync(path.join(quick, 'charts', chart), 'utf8')
      expect(svg, chart).to.contain('--quick: tiny sizes, measures nothing').and.contain(machine).and.not.contain('--machine')
    }

    // Drawn again from the CSV alone: no mark, and the machine unknown unless given.
    const out = path.join(t.dir, 'report')
    await run('report.js', [csv, out])
    const md = fs.readFileSync(path.join(out, 'report.md'), 'utf8')
    for (const heading of ['## write', '## read', '## unlink']) expect(md).to.contain(heading)
    expect(md).to.match(/\| 4 MiB \| (kfs|vanilla) \| 2 \| [\d.]+, [\d.]+ \|/)
    expect(md).to.contain('n = 2 < 5: no statistics')
    const charts = fs.readdirSync(path.join(out, 'charts'))
    expect(charts).to.include.members(['time-write.svg', 'ratio-read.svg', 'trials-unlink-4MiB.svg'])
    expect(charts.filter((c) => /^(mean|sd)-/.test(c))).to.deep.equal([])
    for (const chart of charts) expect(fs.readFileSync(path.join(out, 'charts', chart), 'utf8')).to.match(/^<svg [\s\S]*<\/svg>\n$/).and.not.contain('--quick')
    expect(md).to.contain('machine not recorded in the CSV (perf/report.js --machine names it)')
  })

  it('--grow keeps the files: no unlinks, and --keep leaves the databases', async () => {
    const csv = path.join(t.dir, 'grow.csv')
    const dbs = path.join(t.dir, 'dbs')
    const { stderr } = await run('benchmark.js', ['2', csv, '--sizes', '1', '--grow', '--keep', '--dir', dbs, '--engines', 'vanilla'])
    const rows = parseCsv(fs.readFileSync(csv, 'utf8'))
    expect(rows.map((r) => r.operation)).to.deep.equal(['write', 'read', 'write', 'read'])
    expect(rows[2].db_disk_bytes).to.be.above(rows[0].db_disk_bytes)
    expect(stderr).to.contain('databases kept in')
    expect(fs.readdirSync(dbs)).to.have.length(1)
  })

  it('parses positional and flag arguments, and rejects bad ones', () => {
    expect(parseArgs(['10', 'out.csv'])).to.include({ trials: 10, csv: 'out.csv', out: '.' })
    expect(parseArgs(['--out', 'x/sweep.csv'])).to.include({ csv: 'x/sweep.csv', out: 'x' })
    expect(parseArgs(['--out', 'x/sweep'])).to.include({ out: 'x/sweep' }).and.not.have.property('csv')
    expect(path.dirname(parseArgs([]).out)).to.equal(os.tmpdir())
    expect(path.basename(parseArgs([]).out)).to.match(/^kfs-bench-benchmark-\d{8}-\d{6}$/)
    expect(parseArgs(['--trials', '3', '--sizes', '8,16', '--engines', 'kfs'])).to.deep.include({ trials: 3, sizes: [8, 16], engines: ['kfs'] })
    expect(parseArgs([])).to.deep.include({ trials: 100, sizes: [8, 16, 32, 64, 128, 256, 512], engines: ['kfs', 'vanilla'] })
    expect(parseArgs(['--quick'])).to.deep.include({ trials: 2, sizes: [1, 2, 4] })
    for (const bad of [['0'], ['x'], ['--trials'], ['--sizes', '8,-1'], ['--engines', 'rocks'], ['--what'], ['1', 'a', 'b']]) {
      expect(() => parseArgs(bad), bad.join(' ')).to.throw()
    }
  })

  it('refuses to start when the disk cannot hold the run', async () => {
    const err = await run('benchmark.js', ['--trials', '100000', '--grow', '--out', path.join(t.dir, 'x.csv'), '--dir', t.dir]).then(() => undefined, (e) => e)
    expect(err, 'expected a refusal').to.be.an('error')
    expect(err.stderr).to.match(/free; this run needs about/)
  })

  // `npm run benchmark > results.csv` writes npm's banner into the file before the CSV.
  it('benchmark:report reads a CSV after npm\'s banner, and still refuses what is not a benchmark CSV', async () => {
    const rows = ['1,kfs,write,1048576,12.5,80,3,4096,2026-01-01T00:00:00.000Z', '1,vanilla,write,1048576,10.5,95.2,0,4096,2026-01-01T00:00:01.000Z']
    const csv = [HEADER, ...rows].join('\n') + '\n'
    const banner = '\n> kfs@0.1.0 benchmark\n> node perf/benchmark.js --quick\n\n'
    expect(parseCsv(banner + csv).map((r) => r.engine)).to.deep.equal(['kfs', 'vanilla'])
    const file = path.join(t.dir, 'results.csv')
    fs.writeFileSync(file, banner + csv)
    await run('report.js', [file, path.join(t.dir, 'report')])
    expect(fs.readFileSync(path.join(t.dir, 'report', 'report.md'), 'utf8')).to.match(/\| 1 MiB \| kfs \| 1 \|/)

    // Only npm's lines are skipped: anything else before the header is an error, as before.
    for (const text of ['', banner, 'npm warn config something\n' + csv, banner + 'trial;engine\n', '> kfs@0.1.0 benchmark\nhello\n' + csv, 'a,b,c\n1,2,3\n']) {
      expect(() => parseCsv(text), JSON.stringify(text)).to.throw(/not a benchmark CSV/)
    }
    fs.writeFileSync(file, 'hello\n' + csv)
    const err = await run('report.js', [file, path.join(t.dir, 'report')]).then(() => undefined, (e) => e)
    expect(err, 'expected a failure').to.be.an('error')
    expect(err.code).to.equal(1)
    expect(err.stderr).to.contain('not a benchmark CSV: the header is "hello"')
  })

  // A CSV of `trials` trials of one size, kfs at 10 ms and vanilla at 20 ms, give or take.
  const csvOf = (trials) => [HEADER, ...Array.from({ length: trials }, (_, i) => ['kfs', 'vanilla'].map((e, j) =>
    `${i + 1},${e},write,1048576,${(10 * (j + 1) + (i % 3)).toFixed(3)},50,${j ? 0 : 3},4096,2026-01-01T00:00:0${i % 10}.000Z`)).flat()].join('\n') + '\n'

  it('benchmark:report prints no statistics under 5 trials: the values, and says so', () => {
    for (const trials of [1, 2, 4]) {
      const file = path.join(t.dir, `few-${trials}.csv`)
      fs.writeFileSync(file, csvOf(trials))
      const { file: md, summary } = report(file, path.join(t.dir, `few-${trials}`))
      const text = fs.readFileSync(md, 'utf8')
      expect(text, `${trials} trials`).to.contain(`n = ${trials} < 5: no statistics`)
      for (const statistic of ['p95', '| sd |', 'Welch', '| t |', 'significant']) expect(text, `${trials} trials: ${statistic}`).to.not.contain(statistic)
      expect(text).to.match(new RegExp(`^\\| 1 MiB \\| kfs \\| ${trials} \\| 10\\.0(, 1[012]\\.0)* \\|$`, 'm'))
      const s = summary.summaries[0]
      expect(s.verdict).to.equal(undefined)
      expect(s.engines.kfs).to.not.have.property('p95')
      const chart = fs.readFileSync(path.join(t.dir, `few-${trials}`, 'charts', 'time-write.svg'), 'utf8')
      expect(chart).to.contain('min-max (n &lt; 5)').and.contain(`n = ${trials}`)
    }
  })

  it('benchmark:report: with 5 trials and more, statistics in tables within 100 columns, charts that say which way is better', () => {
    const file = path.join(t.dir, 'five.csv')
    fs.writeFileSync(file, csvOf(6))
    const out = path.join(t.dir, 'five')
    const { file: md } = report(file, out, { machine: '2 × test CPU, 1 GiB RAM, ext4' })
    const text = fs.readFileSync(md, 'utf8')
    expect(text).to.contain('| size | engine | n | mean | sd | median | p95 |').and.contain('| size | kfs / vanilla | t | p | verdict |')
    expect(text).to.match(/^\| 1 MiB \| 0\.\d+ \| -[\d.]+ \| [<\d. ]+ \| kfs faster, significant \|$/m)
    expect(text).to.not.contain('no statistics')
    for (const line of text.split('\n').filter((l) => l.startsWith('|'))) expect(line.length, line).to.be.at.most(100)
    const time = fs.readFileSync(path.join(out, 'charts', 'time-write.svg'), 'utf8')
    expect(time).to.contain('(lower is better)').and.contain('median of n = 6 trials per bar').and.contain('2 × test CPU, 1 GiB RAM, ext4').and.contain('>interquartile range<')
    expect(time.match(/class="whisker"/g)).to.have.length(2)
    const ratio = fs.readFileSync(path.join(out, 'charts', 'ratio-write.svg'), 'utf8')
    expect(ratio).to.contain('kfs time / vanilla time (lower is better for kfs)').and.contain('class="reference"').and.contain('(log scale)')
    expect(fs.readFileSync(path.join(out, 'charts', 'trials-write-1MiB.svg'), 'utf8')).to.contain('(lower is better)').and.contain('n = 6 trials')
  })

  it('summarize gives a verdict per operation and size', () => {
    const rows = []
    for (let trial = 1; trial <= 10; trial++) {
      rows.push({ trial, engine: 'kfs', operation: 'write', size_bytes: 1, ms: 10 + (trial % 3) })
      rows.push({ trial, engine: 'vanilla', operation: 'write', size_bytes: 1, ms: 20 + (trial % 3) })
      rows.push({ trial, engine: 'kfs', operation: 'read', size_bytes: 1, ms: 5 + (trial % 4) })
      rows.push({ trial, engine: 'vanilla', operation: 'read', size_bytes: 1, ms: 5 + ((trial + 1) % 4) })
    }
    const { summaries } = summarize(rows)
    expect(summaries.find((s) => s.operation === 'write').verdict).to.equal('kfs faster, significant')
    expect(summaries.find((s) => s.operation === 'read').verdict).to.equal('no significant difference')
  })
})

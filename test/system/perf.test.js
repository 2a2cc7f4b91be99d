'use strict'

const { expect } = require('chai')
const fs = require('node:fs')
const path = require('node:path')
const { scaled } = require('../helpers')
const { usePerf } = require('./perf-harness')
const { lineChart, barChart, linearAxis, logAxis } = require('../../perf/harness/svg')
const { median } = require('../../perf/harness/stats')
const { machineOf } = require('../../perf/harness/script')

// What a chart shows, read from its SVG: its width, notes, legend (names and where they
// start) and tick values.
function readChart (svg) {
  const unescape = (s) => s.replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&amp;/g, '&')
  const texts = (cls) => [...svg.matchAll(new RegExp(`<text class="${cls}" x="([-\\d.]+)"[^>]*>([^<]*)</text>`, 'g'))].map((m) => ({ x: Number(m[1]), text: unescape(m[2]) }))
  const numbers = (cls) => texts(cls).map((t) => Number(t.text.replace(/,/g, '')))
  return { width: Number(/^<svg [^>]*width="([\d.]+)"/.exec(svg)[1]), notes: texts('note').map((t) => t.text), legend: texts('legend'), xTicks: numbers('x-tick'), yTicks: numbers('y-tick') }
}

const oneTwoFive = (v) => v > 0 && [1, 2, 5].some((m) => Math.abs(v / 10 ** Math.floor(Math.log10(v) + 1e-9) - m) < 1e-9)

// Ticks at 1, 2 or 5 times powers of ten (a log axis), or evenly at such a step from a
// multiple of it (a linear axis).
function expectNiceTicks (ticks) {
  expect(ticks.length, ticks.join(' ')).to.be.within(2, 12)
  const step = ticks[1] - ticks[0]
  const linear = oneTwoFive(step) && Math.abs(ticks[0] / step - Math.round(ticks[0] / step)) < 1e-9 && ticks.every((v, i) => Math.abs(v - ticks[0] - i * step) < step * 1e-9)
  const log = ticks.every((v, i) => oneTwoFive(v) && (i === 0 || v > ticks[i - 1]))
  expect(linear || log, ticks.join(' ')).to.equal(true)
}

// A chart one can read: the legend says `names`, each whole and inside the chart (at a
// generous 0.75 em a character: DejaVu Sans averages about 0.6), none saying a word
// twice ("kfs kfs list"); the ticks are round numbers.
function expectReadable (svg, names) {
  const chart = readChart(svg)
  expect(chart.legend.map((l) => l.text)).to.deep.equal(names)
  for (const { x, text } of chart.legend) {
    expect(x + text.length * 0.75 * 12, text).to.be.at.most(chart.width)
    const words = text.toLowerCase().match(/[a-z0-9]+/g)
    expect(new Set(words).size, text).to.equal(words.length)
  }
  for (const ticks of [chart.xTicks, chart.yTicks]) if (ticks.length) expectNiceTicks(ticks)
  return chart
}

// Every line of a Markdown table within 100 columns.
function expectNarrowTables (md) {
  const rows = md.split('\n').filter((line) => line.startsWith('|'))
  expect(rows.length).to.be.above(0)
  for (const row of rows) expect(row.length, row).to.be.at.most(100)
}

describe('perf/harness/svg.js', () => {
  it('axes have round ticks that take in both ends of the data', () => {
    for (const [min, max] of [[0, 16440], [1, 100], [500, 100000], [0, 0.37], [3, 3], [-5, 12], [0, 0]]) {
      const { ticks } = linearAxis(min, max)
      expectNiceTicks(ticks)
      expect(ticks[0], `${min} ${max}`).to.be.at.most(min)
      expect(ticks[ticks.length - 1], `${min} ${max}`).to.be.at.least(max)
    }
    expect(linearAxis(1, 100, { count: 8, integer: true }).ticks).to.deep.equal([0, 20, 40, 60, 80, 100])
    for (const [min, max] of [[461, 16440], [500, 100000], [11, 4600], [50, 200], [500, 500], [0.3, 2e6]]) {
      const { ticks } = logAxis(min, max)
      expectNiceTicks(ticks)
      expect(ticks[0], `${min} ${max}`).to.be.at.most(min)
      expect(ticks[ticks.length - 1], `${min} ${max}`).to.be.at.least(max)
    }
    expect(logAxis(500, 100000).ticks).to.deep.equal([500, 1000, 2000, 5000, 10000, 20000, 50000, 100000])
    expect(logAxis(0.3, 2e6).ticks).to.deep.equal([0.1, 1, 10, 100, 1000, 10000, 100000, 1000000, 10000000]) // decades only, beyond three
  })

  it('charts: the legend fits its longest name, a log axis says so, a note is shown', () => {
    const series = [{ name: 'kfs', values: [600, 700] }, { name: 'Wide Wordy Other Systems (published)', values: [16000, NaN] }]
    const bars = barChart({ title: 'reads', mark: 'measures nothing', xLabel: 'size', yLabel: 'MiB/s', yScale: 'log', groups: ['1 MiB', '2 MiB'], series })
    expect(expectReadable(bars, series.map((s) => s.name)).notes).to.deep.equal(['measures nothing'])
    expect(bars).to.contain('MiB/s (log scale)')
    expect(bars.match(/<title>/g)).to.have.length(3) // no bar for a missing value
    const lines = lineChart({ title: 'trials', xLabel: 'trial', yLabel: 'ms', series: [{ name: 'kfs', points: [[1, 3], [2, 5], [37, 4]] }] })
    expect(expectReadable(lines, ['kfs']).xTicks).to.deep.equal([0, 5, 10, 15, 20, 25, 30, 35, 40])
    expect(lines).to.not.contain('log scale')
  })

  it('bar charts: whiskers where a series has errors, a reference line with its legend entry, grey series named', () => {
    const svg = barChart({
      title: 'write: kfs / vanilla (lower is better for kfs)',
      subtitle: ['n = 20', '2 cores'],
      legendNote: ['whiskers:', 'interquartile range'],
      xLabel: 'size',
      yLabel: 'ratio',
      yScale: 'log',
      reference: 1,
      referenceLabel: '1.0: as fast',
      groups: ['8', '16'],
      series: [{ name: 'kfs / vanilla', values: [2.5, 0.8], errors: [[2, 3], [0.7, 0.9]] }, { name: 'published', grey: true, values: [1.2, NaN] }]
    })
    const chart = expectReadable(svg, ['kfs / vanilla', 'published'])
    expect(chart.notes).to.deep.equal(['n = 20', '2 cores'])
    expect(svg.match(/class="whisker"/g)).to.have.length(2)
    expect(svg).to.contain('class="reference"').and.contain('>1.0: as fast<').and.contain('>interquartile range<')
    expect(svg).to.match(/fill="#9a9a9a">published</)
    // The axis takes in the whiskers and the reference: 0.7 to 3 on a log axis.
    expect(chart.yTicks[0]).to.be.at.most(0.7)
    expect(chart.yTicks[chart.yTicks.length - 1]).to.be.at.least(3)
    // A bar below the reference hangs from it: its top is the reference line.
    const refY = Number(/class="reference" x1="[\d.]+" x2="[\d.]+" y1="([\d.]+)"/.exec(svg)[1])
    const bars = [...svg.matchAll(/<rect x="[\d.]+" y="([\d.]+)" width="[\d.]+" height="([\d.]+)" fill="#1f77b4"><title>/g)].map((m) => [Number(m[1]), Number(m[2])])
    expect(bars[0][0] + bars[0][1]).to.be.closeTo(refY, 0.2) // 2.5: rises to the line
    expect(bars[1][0]).to.be.closeTo(refY, 0.2) // 0.8: hangs from it
  })
})

// Runs the throughput benchmark once at a tiny size so it cannot silently rot.
describe('perf/probes/throughput.js', function () {
  this.timeout(scaled(120000))
  const { tmp, run } = usePerf()

  it('runs at a tiny size and reports every operation (streams, random ranges and put too), the targets and memory', async () => {
    const script = 'probes/throughput.js'
    const { stdout } = await run(script, ['--sizes', '1,2', '--reps', '1', '--out', path.join(tmp.dir, 'out')])
    for (const op of ['write', 'read', 'unlink']) expect(stdout).to.match(new RegExp(`\\| 1 MiB \\| sync \\| ${op} \\|`))
    expect(stdout).to.match(/\| 2 MiB \| async \| read stream \(fs: 1 MiB highWaterMark\) \| \d+ \(\d+ ms\) \| \d+ \(\d+ ms\) \| [\d.]+ \|/)
    expect(stdout).to.match(/\| 2 MiB \| sync \| read stream, checked \/ not \| \| \d+ \/ \d+ \| check costs -?\d+% \|/)
    expect(stdout).to.match(/\| 2 MiB \| sync \| readFile, checked \/ not \| \| \d+ \/ \d+ \| check costs -?\d+% \|/)
    expect(stdout).to.match(/\| 2 MiB \| async \| 2 random 1 MiB ranges, one at a time \| \d+ \(\d+ ms\) \| \d+ \(\d+ ms\) \| [\d.]+; kfs ranges \/ kfs stream [\d.]+ \|/)
    expect(stdout).to.match(/\| 1 MiB \| sync \| put\(buffer\) \(fs: write\) \|/)
    expect(stdout).to.contain('targets are defined for files of 128 MiB and more')
    expect(stdout).to.match(/streaming 2 MiB in: peak private RSS grew [\d.]+ MiB/)
    expect(stdout).to.match(/streaming 2 MiB out: peak private RSS grew [\d.]+ MiB/)
  })

  it('rejects unknown arguments', async () => {
    const script = 'probes/throughput.js'
    const err = await run(script, ['--bogus']).then(() => undefined, (e) => e)
    expect(err, 'expected a failure').to.be.an('error')
    expect(err.stderr).to.contain('unknown argument --bogus')
  })
})

// Large files against plain files and the raw binding, once at tiny sizes.
describe('perf/probes/large-files.js', function () {
  this.timeout(scaled(120000))
  const { tmp, run } = usePerf()

  it('reads each size with every engine, kfs at --before too, and gives each ratio with its spread over rounds', async () => {
    const script = 'probes/large-files.js'
    const before = path.join(__dirname, '..', '..')
    const { stdout } = await run(script, ['--sizes', '1,2', '--rounds', '2', '--reps', '1', '--before', before, '--dir', tmp.dir, '--out', path.join(tmp.dir, 'out')])
    for (const size of [1, 2]) {
      for (const row of ['fs | readFile', 'fs | stream', 'kfs | readFile', 'kfs | stream', 'before | readFile', 'before | stream', 'floor | readFile: gets + CRC32 + copy', 'floor | stream: gets + CRC32', 'floor | stream: iterator + CRC32', 'floor | stream: iterator', 'floor | readFile: gets + copy']) {
        expect(stdout).to.match(new RegExp(`\\| ${size} MiB \\| ${row.replace(/[+|]/g, '\\$&')} \\| [\\d,]+ \\| [\\d,]+-[\\d,]+ \\|`))
      }
      expect(stdout).to.match(new RegExp(`${size} MiB readFile: kfs / fs [\\d.]+ \\([\\d.]+-[\\d.]+\\) \\(target >= 0.9\\); floor / fs [\\d.]+`))
      expect(stdout).to.match(new RegExp(`${size} MiB read stream: kfs / fs [\\d.]+ \\([\\d.]+-[\\d.]+\\) \\(target >= 0.8\\)`))
      expect(stdout).to.match(new RegExp(`${size} MiB kfs / before: readFile [\\d.]+`))
      expect(stdout).to.match(new RegExp(`${size} MiB, the parts \\(ms, medians of rounds\\): a new Buffer filled [\\d.,]+; gets [\\d.,]+`))
    }
    expect(fs.readdirSync(tmp.dir).filter((name) => name.startsWith('kfs-large-files-')), 'its data is removed').to.deep.equal([])
  })
})

// The read path against the raw binding on the file's shard, once at a tiny size: the
// store may hold shards other than the file's, made ahead of their first file.
describe('perf/probes/read-path.js', function () {
  this.timeout(scaled(120000))
  const { tmp, run } = usePerf()

  it('reads the file with kfs and with the raw binding on its shard, and gives each ratio', async () => {
    const { stdout } = await run('probes/read-path.js', ['--size', '4', '--rounds', '1', '--reps', '1', '--ranges', '2', '--dir', tmp.dir, '--out', path.join(tmp.dir, 'out')])
    for (const row of ['kfs ranges 1', 'kfs stream checked', 'raw gets 1', 'raw iterator 3 a trip + crc32', 'raw meta + gets + crc32 16']) {
      expect(stdout).to.match(new RegExp(`\\| ${row.replace(/\+/g, '\\+')} \\| [\\d,]+ \\| [\\d,]+-[\\d,]+ \\|`))
    }
    expect(stdout).to.match(/checked stream \/ raw iterator checking the same CRC32s \(3 a trip\): [\d.]+ \([\d.]+-[\d.]+\), target >= 0.8/)
    expect(fs.readdirSync(tmp.dir).filter((name) => name.startsWith('kfs-read-path-')), 'its data is removed').to.deep.equal([])
  })
})

// The cost of a new shard, once at tiny sizes.
describe('perf/probes/new-shards.js', function () {
  this.timeout(scaled(60000))
  const { tmp, run } = usePerf()

  it('makes shards with LevelDB and from the template, stores a new store\'s first files next to raw LevelDBs\', and prints a row per round', async () => {
    const script = 'probes/new-shards.js'
    const { stdout } = await run(script, ['--shards', '3', '--files', '10', '--rounds', '2', '--out', path.join(tmp.dir, 'out')])
    const rows = stdout.split('\n').filter((line) => /^\| \d+ \|/.test(line))
    expect(rows).to.have.length(2)
    for (const row of rows) expect(row).to.match(/^\| \d \| [\d.]+ \| [\d.]+ \| [\d.]+ \| [\d.]+ \| [\d.]+ \| [\d.]+ \|$/)
    expect(stdout).to.match(/first files: kfs [\d.]+ s \([\d.]+-[\d.]+\), raw made on first use [\d.]+ s \([\d.]+-[\d.]+\), raw made at once [\d.]+ s/)
    expect(stdout).to.contain('target: a new store\'s first 1,000 small files in under 1 s')
    const err = await run(script, ['--bogus', '1']).then(() => undefined, (e) => e)
    expect(err, 'expected a usage error').to.be.an('error')
    expect(err.code).to.equal(2)
  })
})

// The fio-style and ls-style benchmarks, once each at tiny sizes: every engine and cell
// runs, and the CSV has the documented shape with figures that add up.
describe('perf/fio.js and perf/ls.js', function () {
  this.timeout(scaled(240000))
  const { tmp, run } = usePerf()
  const csv = (file) => {
    const [header, ...lines] = fs.readFileSync(file, 'utf8').trim().split('\n')
    const columns = header.split(',')
    return { header, rows: lines.map((line) => Object.fromEntries(line.split(',').map((cell, i) => [columns[i], cell]))) }
  }

  // --from-csv draws the run's charts again, the same, from its CSV alone.
  const expectDrawnAgain = async (script, out, csvFile, charts) => {
    const again = path.join(tmp.dir, 'again')
    await run(script, ['--from-csv', path.join(out, csvFile), '--quick', '--out', again, '--machine', machineOf(tmp.dir)])
    expect(fs.readdirSync(again).sort()).to.deep.equal(charts)
    for (const file of charts) expect(fs.readFileSync(path.join(again, file), 'utf8'), file).to.equal(fs.readFileSync(path.join(out, file), 'utf8'))
  }

  it('fio --quick: every engine, test and file size, with bandwidth, IOPS and latencies', async () => {
    const out = path.join(tmp.dir, 'out')
    const { stdout } = await run('fio.js', ['--quick', '--dir', tmp.dir, '--out', out])
    const { header, rows } = csv(path.join(out, 'fio.csv'))
    expect(header).to.equal(require('../../perf/fio').HEADER)
    const cells = new Set(rows.map((r) => `${r.engine} ${r.part} ${r.test} ${r.file_size_bytes} ${r.jobs}`))
    const expected = []
    for (const engine of ['kfs', 'vanilla', 'fs']) {
      for (const test of ['seq-write', 'seq-read']) expected.push(`${engine} sequential ${test} ${8 * 1024 * 1024} 1`, `${engine} sequential ${test} ${2 * 1024 * 1024} 4`)
      for (const test of ['seq-read', 'rand-read']) for (const size of [256 * 1024, 1024 * 1024, 3 * 1024 * 1024]) expected.push(`${engine} by-size ${test} ${size} 4`)
    }
    expect([...cells].sort()).to.deep.equal(expected.sort())
    expect(rows).to.have.length(expected.length)
    for (const r of rows) {
      const [seconds, bytes, ops, mib, gib, iops, avg, p99] = ['seconds', 'bytes', 'ops', 'mib_per_s', 'gib_per_s', 'iops', 'avg_ms', 'p99_ms'].map((c) => Number(r[c]))
      expect(seconds * bytes * ops * avg * p99, JSON.stringify(r)).to.be.above(0)
      expect(mib).to.be.closeTo(bytes / 1024 / 1024 / seconds, 0.1 + mib * 0.01)
      expect(gib).to.be.closeTo(mib / 1024, 0.001)
      expect(iops).to.be.closeTo(ops / seconds, 0.1 + iops * 0.01)
      expect(p99).to.be.at.least(avg * 0.5)
    }
    // The sequential part moves each file exactly once.
    for (const r of rows.filter((r) => r.part === 'sequential')) expect(Number(r.bytes)).to.equal(Number(r.file_size_bytes) * Number(r.files))
    for (const file of ['fio.md', 'fio-seq-read.svg', 'fio-rand-read.svg', 'fio-seq-read-ratio.svg', 'fio-rand-read-ratio.svg']) expect(fs.existsSync(path.join(out, file)), file).to.equal(true)
    expectNarrowTables(fs.readFileSync(path.join(out, 'fio.md'), 'utf8'))
    expect(stdout).to.contain('## Sequential write and read').and.contain('### Random against sequential reads of the same files')
    expect(fs.readdirSync(tmp.dir)).to.deep.equal(['out']) // the engines' data is gone

    const charts = ['fio-rand-read-ratio.svg', 'fio-rand-read.svg', 'fio-seq-read-ratio.svg', 'fio-seq-read.svg']
    for (const file of ['fio-rand-read.svg', 'fio-seq-read.svg']) {
      const svg = fs.readFileSync(path.join(out, file), 'utf8')
      const chart = expectReadable(svg, ['kfs', 'vanilla', 'fs', 'GCSFuse (published, other hardware)'])
      expect(chart.notes[chart.notes.length - 1], file).to.equal('--quick: tiny sizes, measures nothing')
      expect(chart.notes[0]).to.contain('n = 1: one run').and.contain(machineOf(tmp.dir))
      expect(svg).to.contain('MiB/s (log scale)').and.contain('(higher is better)')
      expect(svg, 'the published series is grey').to.match(/fill="#9a9a9a">GCSFuse \(published, other hardware\)</)
    }
    for (const file of ['fio-rand-read-ratio.svg', 'fio-seq-read-ratio.svg']) {
      const svg = fs.readFileSync(path.join(out, file), 'utf8')
      expectReadable(svg, ['kfs / vanilla', 'kfs / fs'])
      expect(svg).to.contain('class="reference"').and.contain('higher is better for kfs')
    }
    await expectDrawnAgain('fio.js', out, 'fio.csv', charts)
  })

  it('ls --quick: every case of both engines, listing what each store holds', async () => {
    const out = path.join(tmp.dir, 'out')
    const { stdout } = await run('ls.js', ['--quick', '--dir', tmp.dir, '--out', out])
    const { header, rows } = csv(path.join(out, 'ls.csv'))
    expect(header).to.equal(require('../../perf/ls').HEADER)
    for (const engine of ['kfs', 'vanilla']) {
      const of = (kase) => rows.filter((r) => r.engine === engine && r.case === kase)
      expect(of('store').map((r) => `${r.store_files} ${r.listed} ${r.run}`)).to.deep.equal(['50 50 1', '50 50 2', '100 100 1', '100 100 2', '200 200 1', '200 200 2'])
      expect(of('one-shard')).to.have.length(2)
      expect(of('shard-alone').map((r) => r.listed)).to.deep.equal(['40', '40'])
      expect(of('shard-beside-others').map((r) => r.listed)).to.deep.equal(engine === 'kfs' ? ['40', '40'] : ['240', '240'])
      for (const r of rows.filter((r) => r.engine === engine)) {
        expect(Number(r.list_ms) * Number(r.cli_ms), JSON.stringify(r)).to.be.above(0)
        if (r.case !== 'store') expect(Number(r.shard)).to.be.within(0, engine === 'kfs' ? 255 : 0)
      }
    }
    const oneShard = rows.find((r) => r.engine === 'kfs' && r.case === 'one-shard')
    expect(Number(oneShard.listed)).to.be.within(1, 10) // one shard's share of 110 files
    expect(rows.find((r) => r.engine === 'vanilla' && r.case === 'one-shard').listed).to.equal('110')
    expect(stdout).to.contain('## A whole store').and.contain('Beside others / alone').and.contain('n = 2 < 5: no statistics')
    expect(stdout).to.not.contain('LeoFS')
    expectNarrowTables(stdout)
    expect(fs.readdirSync(tmp.dir)).to.deep.equal(['out'])

    const chart = expectReadable(fs.readFileSync(path.join(out, 'ls.svg'), 'utf8'), ['kfs: list()', 'kfs: list command', 'vanilla: list()', 'vanilla: list command'])
    expect(chart.notes).to.include('--quick: tiny stores, measures nothing')
    expect(fs.readFileSync(path.join(out, 'ls.svg'), 'utf8')).to.contain('lower is better').and.not.contain('LeoFS')
    expectReadable(fs.readFileSync(path.join(out, 'ls-ratio.svg'), 'utf8'), ['list()', 'list command'])
    expect(chart.xTicks[0]).to.be.at.most(50)
    expect(chart.xTicks[chart.xTicks.length - 1]).to.be.at.least(200)
    const medians = []
    for (const engine of ['kfs', 'vanilla']) {
      for (const n of ['50', '100', '200']) {
        const runs = rows.filter((r) => r.engine === engine && r.case === 'store' && r.store_files === n)
        medians.push(median(runs.map((r) => Number(r.list_ms))), median(runs.map((r) => Number(r.cli_ms))))
      }
    }
    expect(chart.yTicks[0]).to.be.at.most(Math.min(...medians))
    expect(chart.yTicks[chart.yTicks.length - 1]).to.be.at.least(Math.max(...medians))
    await expectDrawnAgain('ls.js', out, 'ls.csv', ['ls-ratio.svg', 'ls.svg'])

    const err = await run('ls.js', ['--from-csv', path.join(out, 'ls.md'), '--out', path.join(tmp.dir, 'x')]).then(() => undefined, (e) => e)
    expect(err, 'a Markdown file is no CSV').to.be.an('error')
    expect(err.stderr).to.contain('is not this script\'s CSV')
  })

  it('refuse bad arguments with a message and exit code 2', async () => {
    for (const [script, argv, message] of [['fio.js', ['--bs', '0'], '--bs takes a size'], ['fio.js', ['--engines', 'zfs'], '--engines: unknown value zfs'], ['ls.js', ['--runs', '-1'], '--runs takes a positive integer']]) {
      const err = await run(script, argv).then(() => undefined, (e) => e)
      expect(err, `${script} ${argv.join(' ')}`).to.be.an('error')
      expect(err.code).to.equal(2)
      expect(err.stderr).to.contain(message)
    }
  })
})

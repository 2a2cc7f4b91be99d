'use strict'

const { expect } = require('chai')
const fs = require('node:fs')
const path = require('node:path')
const { execFile } = require('node:child_process')
const { promisify } = require('node:util')
const { useTmp } = require('./helpers')

// Runs the throughput benchmark once at a tiny size so it cannot silently rot.
describe('perf/throughput.js', function () {
  this.timeout(120000)

  it('runs at a tiny size and reports every operation (streams, random ranges and put too), the targets and memory', async () => {
    const script = path.join(__dirname, '..', 'perf', 'throughput.js')
    const { stdout } = await promisify(execFile)(process.execPath, [script, '--sizes', '1,2', '--reps', '1'])
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
    const script = path.join(__dirname, '..', 'perf', 'throughput.js')
    const run = promisify(execFile)(process.execPath, [script, '--bogus'])
    const err = await run.then(() => undefined, (e) => e)
    expect(err, 'expected a failure').to.be.an('error')
    expect(err.stderr).to.contain('unknown argument --bogus')
  })
})

// The storage-node workload script, once at tiny sizes: every case runs and reports.
describe('perf/node.js', function () {
  this.timeout(240000)

  it('--quick runs every case, each engine in its own process, and prints every table', async () => {
    const script = path.join(__dirname, '..', 'perf', 'node.js')
    const { stdout } = await promisify(execFile)(process.execPath, [script, '--quick'])
    expect(stdout).to.match(/\| kfs \| [\d,]+ \| [\d,]+ \| 1\.00 \| [\d,]+ \| 1\.00 \|/)
    expect(stdout).to.match(/\| one raw LevelDB \(put\) \| [\d,]+ \|/)
    expect(stdout).to.match(/list\(\) \/ keys-only iterator: [\d.]+/)
    expect(stdout).to.match(/failures: \{\}; peak descriptors [\d,]+/)
    expect(stdout).to.match(/kfs 32 writers \/ 1: [\d.]+/)
    expect(stdout).to.match(/\| vanilla \| 32 \| [\d,]+ \| [\d,]+ \|/)
    for (const engine of ['kfs', 'kfs-no-reclaim', 'vanilla']) expect(stdout).to.match(new RegExp(`\\| ${engine} \\| [\\d,]+ \\| [\\d.]+ \\|`))
  })
})

// The fio-style and ls-style benchmarks, once each at tiny sizes: every engine and cell
// runs, and the CSV has the documented shape with figures that add up.
describe('perf/fio.js and perf/ls.js', function () {
  this.timeout(240000)
  const tmp = useTmp()
  const run = (script, argv) => promisify(execFile)(process.execPath, [path.join(__dirname, '..', 'perf', script), ...argv])
  const csv = (file) => {
    const [header, ...lines] = fs.readFileSync(file, 'utf8').trim().split('\n')
    const columns = header.split(',')
    return { header, rows: lines.map((line) => Object.fromEntries(line.split(',').map((cell, i) => [columns[i], cell]))) }
  }

  it('fio --quick: every engine, test and file size, with bandwidth, IOPS and latencies', async () => {
    const out = path.join(tmp.dir, 'out')
    const { stdout } = await run('fio.js', ['--quick', '--dir', tmp.dir, '--out', out])
    const { header, rows } = csv(path.join(out, 'fio.csv'))
    expect(header).to.equal(require('../perf/fio').HEADER)
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
    for (const file of ['fio.md', 'fio-seq-read.svg', 'fio-rand-read.svg']) expect(fs.existsSync(path.join(out, file)), file).to.equal(true)
    expect(stdout).to.contain('## Sequential write and read').and.contain('### Random against sequential reads of the same files')
    expect(fs.readdirSync(tmp.dir)).to.deep.equal(['out']) // the engines' data is gone
  })

  it('ls --quick: every case of both engines, listing what each store holds', async () => {
    const out = path.join(tmp.dir, 'out')
    const { stdout } = await run('ls.js', ['--quick', '--dir', tmp.dir, '--out', out])
    const { header, rows } = csv(path.join(out, 'ls.csv'))
    expect(header).to.equal(require('../perf/ls').HEADER)
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
    expect(fs.readFileSync(path.join(out, 'ls.svg'), 'utf8')).to.match(/^<svg/)
    expect(stdout).to.contain('## A whole store').and.contain('Beside others / alone')
    expect(fs.readdirSync(tmp.dir)).to.deep.equal(['out'])
  })

  it('refuse bad arguments with a message and exit code 2', async () => {
    for (const [script, argv, message] of [['fio.js', ['--bs', '0'], '--bs takes a size'], ['fio.js', ['--engines', 'zfs'], 'unknown engine zfs'], ['ls.js', ['--runs', '-1'], '--runs takes a positive integer']]) {
      const err = await run(script, argv).then(() => undefined, (e) => e)
      expect(err, `${script} ${argv.join(' ')}`).to.be.an('error')
      expect(err.code).to.equal(2)
      expect(err.stderr).to.contain(message)
    }
  })
})

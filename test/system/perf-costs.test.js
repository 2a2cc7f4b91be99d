'use strict'

const { expect } = require('chai')
const fs = require('node:fs')
const path = require('node:path')
const { scaled } = require('../helpers')
const { usePerf } = require('./perf-harness')

// perf/probes/costs.js, once at tiny sizes: every figure is printed beside its target.
describe('perf/probes/costs.js', function () {
  this.timeout(scaled(120000))
  const { tmp, run } = usePerf()
  const script = 'probes/costs.js'

  it('--quick prints every figure with its target and verdict, and leaves no data behind', async () => {
    const { stdout } = await run(script, ['--quick', '--dir', tmp.dir, '--out', path.join(tmp.dir, 'out')])
    expect(stdout).to.contain('--quick: tiny sizes, measures nothing')
    const lines = stdout.split('\n')
    const figure = (id) => lines.find((line) => line.startsWith(`figure ${id}: `))
    // A measured figure, then its target and whether it was met.
    for (const id of ['1a', '2a', '2b', '3a', '3b', '4', '5']) {
      expect(figure(id), `figure ${id}`).to.match(/ [\d.,]+( s)? \(rounds [\d.,]+-[\d.,]+\), target (<=|>=|>|<) [\d.,]+( s)?: (met|MISSED)$/)
    }
    expect(figure('6')).to.match(/RSS growth -?[\d,]+ MiB \(rounds -?[\d,]+--?[\d,]+\), target < 1,024 MiB: (met|MISSED); raw leveldown iterators, the floor: -?[\d,]+ MiB$/)
    expect(lines[lines.indexOf(figure('2a')) + 1]).to.match(/^ {2}its floor: a raw leveldown iterator checking the same CRC32s \/ the same unchecked, MiB\/s [\d.]+ \(rounds [\d.]+-[\d.]+\)$/)
    expect(lines[lines.indexOf(figure('1a')) + 1]).to.match(/^ {2}its floor: one raw LevelDB with a kfs shard's options \/ with LevelDB's defaults, time [\d.]+ \(rounds [\d.]+-[\d.]+\)$/)
    expect(lines[lines.indexOf(figure('5')) + 1]).to.match(/^ {2}its floor: 8 raw LevelDBs with kfs's shard options, each made when its first file comes [\d.]+ s \(rounds [\d.]+-[\d.]+\); all made at once, concurrently, on the clock [\d.]+ s \(rounds [\d.]+-[\d.]+\)$/)
    expect(lines[lines.indexOf(figure('3a')) + 1]).to.match(/^ {2}its floor: raw leveldown 1 MiB ranges one at a time \/ the raw iterator read ahead as kfs's stream reads, CRC32s checked, MiB\/s: by gets [\d.]+ \(rounds [\d.]+-[\d.]+\), by a bounded iterator [\d.]+ \(rounds [\d.]+-[\d.]+\); by gets \/ the raw iterator not read ahead [\d.]+ \(rounds [\d.]+-[\d.]+\)$/)
    expect(lines[lines.indexOf(figure('3b')) + 1]).to.match(/^ {2}its floor: raw leveldown 1 MiB ranges by gets \(at most \d+ in flight in all, as in kfs\), 16 in flight \/ one at a time, MiB\/s [\d.]+ \(rounds [\d.]+-[\d.]+\)$/)
    expect(figure('1b')).to.match(/kfs \/ kfs4, time: not measured \(give --kfs4 DIR\)$/)
    expect(figure('1c')).to.match(/time [\d.]+ \(rounds [\d.]+-[\d.]+\): no target/)
    expect(lines.filter((line) => line.startsWith('figure '))).to.have.length(10)
    for (const table of ['### 1. ', '### 2, 3. ', '### 4. ', '### 5, 6. ']) expect(stdout).to.contain(table)
    expect(fs.readdirSync(tmp.dir)).to.deep.equal(['out']) // no data: only the report it was asked for
    expect(fs.readdirSync(path.join(tmp.dir, 'out'))).to.deep.equal(['costs.md'])
  })

  it('refuses bad arguments with a message and exit code 2', async () => {
    for (const [argv, message] of [[['--rounds', '0'], '--rounds takes a positive integer'], [['--kfs4', tmp.dir], 'no kfs v4 there'], [['--bogus'], 'unknown argument --bogus']]) {
      const err = await run(script, [...argv]).then(() => undefined, (e) => e)
      expect(err, argv.join(' ')).to.be.an('error')
      expect(err.code).to.equal(2)
      expect(err.stderr).to.contain(message)
    }
  })
})

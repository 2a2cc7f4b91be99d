'use strict'

const path = require('node:path')
const { expect } = require('chai')
const { scaled } = require('../helpers')
const { usePerf } = require('./perf-harness')

// The memory of slow readers and writers, once at a tiny size: every case moves every
// byte and reports its growth, and the target lines are printed.
describe('perf/probes/slow-readers.js', function () {
  this.timeout(scaled(60000))
  const { tmp, run } = usePerf()
  const script = 'probes/slow-readers.js'

  it('--quick: kfs, through a holder, raw LevelDB iterators, fs and the writers each move every byte, with their memory growth and the targets', async () => {
    const { stdout } = await run(script, ['--quick', '--rounds', '2', '--readers', '20', '--range', '200K', '--memory', '16M', '--out', path.join(tmp.dir, 'out')])
    const rows = stdout.split('\n').filter((line) => /^\| \d+ \|/.test(line))
    const round = ['kfs', 'holder', 'holder client', 'raw', 'fs', 'writers', 'holder writers', 'holder writers client']
    expect(rows.map((row) => row.split(' | ')[1])).to.deep.equal([...round, ...round])
    for (const row of rows) expect(row).to.match(/^\| \d \| [\w ]+ \| [\d.]+ \| -?[\d,]+ \| -?[\d,]+ \| -?[\d,]+ \| -?[\d,]+ \|$/)
    expect(stdout).to.match(/20 slow readers of 0.20 MiB of files of 0.25 MiB, 20 files/)
    expect(stdout).to.match(/kfs RSS growth: -?[\d,]+ MiB \(target under 1,024\): (met|MISSED); raw LevelDB iterators, the floor: -?[\d,]+ MiB; fs: -?[\d,]+ MiB/)
    expect(stdout).to.match(/kfs private memory growth: -?[\d,]+ MiB \(target: the memory budget \+ 20 x 384 KiB \+ 40 MiB, 64\): (met|MISSED); raw LevelDB iterators, the floor: -?[\d,]+ MiB; fs: -?[\d,]+ MiB/)
    expect(stdout).to.match(/holder private memory growth: -?[\d,]+ MiB \(its client: -?[\d,]+ MiB\) \(target: the memory budget \+ 20 x 384 KiB \+ 40 MiB, 64\): (met|MISSED)/)
    expect(stdout).to.match(/holder writers private memory growth: -?[\d,]+ MiB \(its client: -?[\d,]+ MiB\) \(target: the memory budget \+ 40 MiB, 56\): (met|MISSED)/)
  })

  it('refuses a bad argument with exit code 2', async () => {
    const err = await run(script, ['--readers', '0']).then(() => undefined, (e) => e)
    expect(err, 'expected a usage error').to.be.an('error')
    expect(err.code).to.equal(2)
  })
})

'use strict'

const path = require('node:path')
const { expect } = require('chai')
const { scaled } = require('../helpers')
const { usePerf } = require('./perf-harness')

// The memory of slow readers, once at a tiny size: every engine reads every byte and
// reports its growth, and the target line is printed.
describe('perf/slow-readers.js', function () {
  this.timeout(scaled(60000))
  const { tmp, run } = usePerf()
  const script = 'slow-readers.js'

  it('--quick: kfs, raw LevelDB iterators and fs each read every file, with their memory growth and the target', async () => {
    const { stdout } = await run(script, ['--quick', '--rounds', '2', '--out', path.join(tmp.dir, 'out')])
    const rows = stdout.split('\n').filter((line) => /^\| \d+ \|/.test(line))
    expect(rows.map((row) => row.split(' | ')[1])).to.deep.equal(['kfs', 'raw', 'fs', 'kfs', 'raw', 'fs'])
    for (const row of rows) expect(row).to.match(/^\| \d \| \w+ \| [\d.]+ \| -?[\d,]+ \| -?[\d,]+ \| -?[\d,]+ \| -?[\d,]+ \|$/)
    expect(stdout).to.match(/kfs RSS growth: -?[\d,]+ MiB \(target under 1,024\): (met|MISSED); raw LevelDB iterators, the floor: -?[\d,]+ MiB; fs: -?[\d,]+ MiB/)
    expect(stdout).to.match(/kfs private memory growth: -?[\d,]+ MiB \(target under the memory budget, 128\): (met|MISSED); raw LevelDB iterators, the floor: -?[\d,]+ MiB; fs: -?[\d,]+ MiB/)
  })

  it('refuses a bad argument with exit code 2', async () => {
    const err = await run(script, ['--readers', '0']).then(() => undefined, (e) => e)
    expect(err, 'expected a usage error').to.be.an('error')
    expect(err.code).to.equal(2)
  })
})

'use strict'

const { expect } = require('chai')
const path = require('node:path')
const { scaled } = require('../helpers')
const { usePerf } = require('./perf-harness')

// The storage-node workload script, once at tiny sizes: every case runs and reports.
describe('perf/probes/node.js', function () {
  this.timeout(scaled(240000))
  const { tmp, run } = usePerf()

  it('--quick runs every case, each engine in its own process, and prints every table', async () => {
    const script = 'probes/node.js'
    const { stdout } = await run(script, ['--quick', '--out', path.join(tmp.dir, 'out')])
    expect(stdout).to.match(/\| kfs \| [\d,]+ \| [\d,]+ \| 1\.00 \| [\d,]+ \| 1\.00 \|/)
    expect(stdout).to.match(/\| one raw LevelDB \(put\) \| [\d,]+ \|/)
    expect(stdout).to.match(/list\(\) \/ keys-only iterator: [\d.]+/)
    expect(stdout).to.match(/failures: \{\}; peak descriptors [\d,]+/)
    expect(stdout).to.match(/kfs 32 writers \/ 1: [\d.]+/)
    expect(stdout).to.match(/\| vanilla \| 32 \| [\d,]+ \| [\d,]+ \|/)
    for (const engine of ['kfs', 'kfs-no-reclaim', 'vanilla']) expect(stdout).to.match(new RegExp(`\\| ${engine} \\| [\\d,]+ \\| [\\d.]+ \\|`))
  })
})

'use strict'

const path = require('node:path')
const { expect } = require('chai')
const { scaled } = require('../helpers')
const { usePerf } = require('./perf-harness')

// Synced writes and their directory syncs, once at a tiny size, compared with this
// checkout itself.
describe('perf/probes/synced-writes.js', function () {
  this.timeout(scaled(60000))
  const { tmp, run } = usePerf()
  const script = 'probes/synced-writes.js'

  it('prints ms per write and directory syncs per write, side by side, and the time to make a store', async () => {
    const { stdout } = await run(script, ['--sizes', '1M', '--bytes', '8M', '--shards', '1', '--rounds', '1', '--compare', path.join(__dirname, '..', '..'), '--out', path.join(tmp.dir, 'out')])
    const rows = stdout.split('\n').filter((line) => /^\| \d/.test(line))
    expect(rows).to.have.length(1)
    expect(rows[0]).to.match(/^\| 1 MiB \| 1 \| 8 \| [\d.]+ \| [\d.]+ \| [\d.]+ \| [\d.]+ \| [\d.]+ \|$/)
    // 8 MiB into one shard passes its 4 MiB memtable: some writes synced the directory.
    expect(Number(rows[0].split(' | ')[6])).to.be.above(0)
    expect(stdout).to.match(/a new store opened and closed: [\d.]+ ms \(compared: [\d.]+ ms\)/)
  })

  it('refuses a bad argument with exit code 2', async () => {
    const err = await run(script, ['--rounds', '0']).then(() => undefined, (e) => e)
    expect(err, 'expected a usage error').to.be.an('error')
    expect(err.code).to.equal(2)
  })
})

'use strict'

const path = require('node:path')
const { execFile, spawnSync } = require('node:child_process')
const { promisify } = require('node:util')
const { expect } = require('chai')
const { useTmp, scaled } = require('../helpers')

// A holder under a flood of connections, once with few: every row and the target line.
describe('perf/probes/holder-flood.js', function () {
  this.timeout(scaled(60000))
  const tmp = useTmp()
  const script = path.join(__dirname, '..', '..', 'perf', 'probes', 'holder-flood.js')

  it('--quick: the flood queued, the stat answered, the holder\'s writes made, and the store removed', async function () {
    if (spawnSync('prlimit', ['--version']).error) this.skip() // the holder's descriptor limit is set through prlimit
    const { stdout } = await promisify(execFile)(process.execPath, [script, '--quick', '--dir', tmp.dir, '--out', path.join(tmp.dir, 'out')])
    expect(stdout).to.contain('--quick: tiny counts, measures nothing')
    expect(stdout).to.match(/\| connected \| 30 \(failed: none\) \|/)
    expect(stdout).to.match(/\| another process's stat through the holder \| ok, [\d,]+ ms \|/)
    expect(stdout).to.match(/\| the holder's 3 writes during the flood \| 3 ok \(failed: none\); [\d,]+ descriptors \|/)
    expect(stdout).to.contain('target: every connection queued, the stat answered, every write made: met')
    expect(require('node:fs').readdirSync(tmp.dir)).to.deep.equal(['out'])
  })
})

'use strict'

const { expect } = require('chai')
const fs = require('node:fs')
const path = require('node:path')
const { scaled } = require('../helpers')
const { usePerf } = require('./perf-harness')

// perf/probes/parallel-commands.js, once with few commands: none fails, nor any read of its
// takeover storm, and it leaves no store behind.
describe('perf/probes/parallel-commands.js', function () {
  this.timeout(scaled(120000))
  const { tmp, run } = usePerf()

  it('--quick: every command succeeds, every read of the storm too, and only the report is left', async () => {
    const { stdout } = await run('probes/parallel-commands.js', ['--quick', '--dir', tmp.dir, '--out', path.join(tmp.dir, 'out')])
    expect(stdout).to.contain('--quick: tiny runs, measures nothing')
    expect(stdout).to.contain('| `kfs put FILE` | 0 | 0 of 4 |')
    expect(stdout).to.contain('| `get`, `stat`, `exists`, `list` | 0 | 0 of 4 |')
    expect(stdout).to.match(/Takeover storm, 2 s: the holder killed [1-9]\d* times, each time under 3 other processes reading; 0 of [1-9][\d,]* of their reads failed\./)
    expect(stdout).to.not.contain('Failures')
    expect(fs.readdirSync(tmp.dir)).to.deep.equal(['out'])
    expect(fs.readdirSync(path.join(tmp.dir, 'out'))).to.deep.equal(['parallel-commands.md'])
  })
})

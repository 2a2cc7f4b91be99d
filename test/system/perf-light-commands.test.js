'use strict'

const { expect } = require('chai')
const fs = require('node:fs')
const path = require('node:path')
const { scaled } = require('../helpers')
const { usePerf } = require('./perf-harness')

// perf/probes/light-commands.js, once with few files and runs: a row per command, each
// with figures both ways, and no store left behind.
describe('perf/probes/light-commands.js', function () {
  this.timeout(scaled(120000))
  const { tmp, run } = usePerf()

  it('--quick: each command\'s CPU and time beside a holder and with none, and only the report is left', async () => {
    const { stdout } = await run('probes/light-commands.js', ['--quick', '--dir', tmp.dir, '--out', path.join(tmp.dir, 'out')])
    expect(stdout).to.contain('--quick: tiny runs, measures nothing')
    const figure = '[\\d,]+ \\([\\d,]+–[\\d,]+\\)'
    for (const command of ['stat KEY', 'exists KEY', 'get KEY', 'list']) {
      expect(stdout).to.match(new RegExp(`\\| \`kfs ${command}\` \\| ${figure} \\| ${figure} \\| ${figure} \\| ${figure} \\|`), command)
    }
    expect(fs.readdirSync(tmp.dir)).to.deep.equal(['out'])
    expect(fs.readdirSync(path.join(tmp.dir, 'out'))).to.deep.equal(['light-commands.md'])
  })
})

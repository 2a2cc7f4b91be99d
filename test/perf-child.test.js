'use strict'

const { expect } = require('chai')
const fs = require('node:fs')
const path = require('node:path')
const { runSteps } = require('../perf/harness/child')
const { useTmp, scaled } = require('./helpers')

const FIXTURE = path.join(__dirname, 'fixtures', 'stepped-engine.js')

function gone (pid) {
  try {
    process.kill(pid, 0)
    return false
  } catch (err) {
    return err.code === 'ESRCH'
  }
}

// The stepped cases of perf/probes/costs.js and perf/probes/write-path.js: engines in
// processes kept for the case, asked for one step each in turn.
describe('perf/harness/child.js runSteps', function () {
  this.timeout(scaled(30000))
  const tmp = useTmp()
  const job = (engine, extra) => ({ name: 'count', engine, pidFile: path.join(tmp.dir, engine), ...extra })

  it('runs each engine\'s steps in turn, rotating who goes first, and stops every process', async () => {
    const results = await runSteps(FIXTURE, [job('a'), job('b'), job('c')], 4)
    expect(Object.keys(results)).to.deep.equal(['a', 'b', 'c'])
    for (const engine of ['a', 'b', 'c']) expect(results[engine].map((r) => [r.engine, r.n])).to.deep.equal([1, 2, 3, 4].map((n) => [engine, n]))
    const order = (s) => ['a', 'b', 'c'].sort((x, y) => results[x][s].at - results[y][s].at).join('')
    expect([0, 1, 2, 3].map(order)).to.deep.equal(['abc', 'bca', 'cab', 'abc'])
    for (const engine of ['a', 'b', 'c']) expect(gone(Number(fs.readFileSync(path.join(tmp.dir, engine), 'utf8'))), engine).to.equal(true)
  })

  for (const [failAt, when] of [['make', 'while making its engine'], [2, 'at a step']]) {
    it(`rejects when an engine fails ${when}, and stops the others`, async () => {
      const err = await runSteps(FIXTURE, [job('a'), job('b', { failAt })], 3, { stderr: 'ignore' }).then(() => undefined, (e) => e)
      expect(err).to.be.an('error')
      expect(err.message).to.equal('b failed with exit code 1')
      for (const engine of ['a', 'b']) expect(gone(Number(fs.readFileSync(path.join(tmp.dir, engine), 'utf8'))), engine).to.equal(true)
    })
  }

  it('rejects when an engine\'s process exits between steps, and stops the others', async () => {
    // b's process exits during a's second step (steps go a b, b a, a b...): b's third
    // step must not be sent to a process that is gone.
    const err = await runSteps(FIXTURE, [job('a', { stepMs: 300 }), job('b', { exitAfter: 2 })], 4, { stderr: 'ignore' }).then(() => undefined, (e) => e)
    expect(err).to.be.an('error')
    expect(err.message).to.equal('b failed with exit code 3')
    for (const engine of ['a', 'b']) expect(gone(Number(fs.readFileSync(path.join(tmp.dir, engine), 'utf8'))), engine).to.equal(true)
  })
})

'use strict'

const { expect } = require('chai')
const fs = require('node:fs')
const path = require('node:path')
const { execFile } = require('node:child_process')
const { useTmp, scaled } = require('../helpers')

const MOCHA = require.resolve('mocha/bin/mocha.js')
const SPEC = path.join(__dirname, '..', 'fixtures', 'perf-timeout.spec.js')

const alive = (pid) => {
  try {
    return fs.readFileSync(`/proc/${pid}/stat`, 'utf8').replace(/^.*\) /, '')[0] !== 'Z'
  } catch {
    return false
  }
}

// test/system/perf-harness.js, which every perf script test runs its script through.
describe('perf scripts run by the tests', function () {
  this.timeout(scaled(60000))
  const t = useTmp()

  it('a script still running at its test\'s bound is killed with its children, its directory removed, the file\'s other tests run, and the failure points to KFS_TEST_SLOWDOWN', async () => {
    const files = { DIR_FILE: path.join(t.dir, 'dir'), PIDS_FILE: path.join(t.dir, 'pids') }
    const result = await new Promise((resolve) => {
      execFile(process.execPath, [MOCHA, '--no-color', '--reporter', 'spec', SPEC], { env: { ...process.env, ...files, BOUND_MS: String(scaled(4000)) } }, (err, stdout, stderr) => {
        resolve({ code: err ? err.code : 0, stdout, stderr })
      })
    })
    expect(result.code, result.stdout + result.stderr).to.equal(1) // one failure
    expect(result.stdout).to.match(/1 passing[\s\S]*1 failing/)
    expect(result.stdout).to.contain('✔ runs after it')
    expect(result.stdout).to.match(/perf-hang\.js .* was still running \d+ ms into a test bounded at \d+ ms: killed it and the processes it started\. On a slow or busy machine, KFS_TEST_SLOWDOWN=3 \(now [\d.]+\) scales every time bound of the tests\./)
    expect(result.stdout).to.not.contain('ENOTEMPTY').and.not.contain('"after each" hook')
    expect(fs.existsSync(fs.readFileSync(files.DIR_FILE, 'utf8')), 'the test\'s directory').to.equal(false)
    const pids = fs.readFileSync(files.PIDS_FILE, 'utf8').split(' ').map(Number)
    expect(pids.filter(alive), 'the script and its child').to.deep.equal([])
  })
})

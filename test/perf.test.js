'use strict'

const { expect } = require('chai')
const path = require('node:path')
const { execFile } = require('node:child_process')
const { promisify } = require('node:util')

// Runs the throughput benchmark once at a tiny size so it cannot silently rot.
describe('perf/throughput.js', function () {
  this.timeout(120000)

  it('runs at a tiny size and reports every operation, the targets and memory', async () => {
    const script = path.join(__dirname, '..', 'perf', 'throughput.js')
    const { stdout } = await promisify(execFile)(process.execPath, [script, '--sizes', '1,2', '--reps', '1'])
    for (const op of ['write', 'read', 'unlink']) expect(stdout).to.match(new RegExp(`\\| 1 MiB \\| sync \\| ${op} \\|`))
    expect(stdout).to.contain('targets are defined for 128 MiB')
    expect(stdout).to.match(/streaming 2 MiB in: peak private RSS grew [\d.]+ MiB/)
    expect(stdout).to.match(/streaming 2 MiB out: peak private RSS grew [\d.]+ MiB/)
  })

  it('rejects unknown arguments', async () => {
    const script = path.join(__dirname, '..', 'perf', 'throughput.js')
    const run = promisify(execFile)(process.execPath, [script, '--bogus'])
    const err = await run.then(() => undefined, (e) => e)
    expect(err, 'expected a failure').to.be.an('error')
    expect(err.stderr).to.contain('unknown argument --bogus')
  })
})

// The storage-node workload script, once at tiny sizes: every case runs and reports.
describe('perf/node.js', function () {
  this.timeout(240000)

  it('--quick runs every case, each engine in its own process, and prints every table', async () => {
    const script = path.join(__dirname, '..', 'perf', 'node.js')
    const { stdout } = await promisify(execFile)(process.execPath, [script, '--quick'])
    expect(stdout).to.match(/\| kfs \| [\d,]+ \| [\d,]+ \| 1\.00 \| [\d,]+ \| 1\.00 \|/)
    expect(stdout).to.match(/\| one raw LevelDB \(put\) \| [\d,]+ \|/)
    expect(stdout).to.match(/list\(\) \/ keys-only iterator: [\d.]+/)
    expect(stdout).to.match(/failures: \{\}; peak descriptors [\d,]+/)
    expect(stdout).to.match(/kfs 32 writers \/ 1: [\d.]+/)
    expect(stdout).to.match(/\| vanilla \| 32 \| [\d,]+ \| [\d,]+ \|/)
    for (const engine of ['kfs', 'kfs-no-reclaim', 'vanilla']) expect(stdout).to.match(new RegExp(`\\| ${engine} \\| [\\d,]+ \\| [\\d.]+ \\|`))
  })
})

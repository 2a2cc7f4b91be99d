'use strict'

const { expect } = require('chai')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { cli, UsageError, topComment } = require('../../perf/harness/script')
const { scaled } = require('../helpers')
const { usePerf, PERF } = require('./perf-harness')

const pkg = require('../../package.json')
// Every script package.json runs, and every other perf script a person runs by hand, by
// their paths under perf/.
const fromPackage = Object.values(pkg.scripts).map((command) => /^node perf\/([\w/-]+\.js)$/.exec(command)).filter(Boolean).map((m) => m[1])
const SCRIPTS = [...new Set([...fromPackage, ...['read-path.js', 'large-files.js', 'share.js', 'holder-flood.js', 'parallel-commands.js', 'light-commands.js', 'metrics-scrape.js', 'new-shards.js', 'write-path.js', 'small-own.js', 'expiry-space.js', 'restore-trash.js'].map((probe) => `probes/${probe}`)])]

describe('perf scripts: one command line', function () {
  this.timeout(scaled(60000))
  const { run } = usePerf()

  it('package.json runs the benchmarks it should', () => {
    expect(fromPackage).to.include.members(['benchmark.js', 'report.js', 'fio.js', 'ls.js', 'pieces.js', 'grow.js', 'churn.js', ...['micro.js', 'throughput.js', 'node.js', 'costs.js', 'slow-readers.js', 'synced-writes.js'].map((probe) => `probes/${probe}`)])
  })

  for (const script of SCRIPTS) {
    it(`${script}: --help prints the usage and exits with 0; an unknown argument exits with 2, one line, no stack`, async () => {
      for (const help of ['--help', '-h']) {
        const { stdout, stderr } = await run(script, [help])
        expect(stdout, help).to.match(/^usage: (npm run [\w:-]+ --|node perf\/(probes\/)?[\w-]+\.js) /)
        expect(stdout).to.contain('--out DIR').and.contain('-h, --help').and.contain('in the temp dir')
        expect(stdout, 'the top comment follows').to.contain(topComment(path.join(PERF, script)).split('\n')[0])
        expect(stderr).to.equal('')
      }
      const err = await run(script, ['--no-such-option']).then(() => undefined, (e) => e)
      expect(err, 'expected a failure').to.be.an('error')
      expect(err.code).to.equal(2)
      expect(err.stderr).to.equal(`perf/${script}: unknown argument --no-such-option (see --help)\n`)
      expect(err.stdout).to.equal('')
    })
  }

  it('the parser: types, lists, flags that set, --name=value, positionals, defaults, --out under the temp dir', () => {
    const command = cli(path.join(PERF, 'fio.js'), {
      positional: [{ key: 'first', name: 'first', type: 'count' }],
      options: [
        { name: '--count', type: 'count', default: 3 },
        { name: '--size', type: 'size', default: 1024 },
        { name: '--rate', type: 'number' },
        { name: '--sizes', type: 'list', of: 'size', default: [1] },
        { name: '--engines', type: 'list', values: ['a', 'b'], default: ['a'] },
        { name: '--dir', type: 'path' },
        { name: '--flag', type: 'flag' },
        { name: '--quick', type: 'flag', sets: { count: 1, quick: true } }
      ],
      defaults: { quick: false }
    })
    const defaults = command.parse([])
    expect(defaults).to.deep.include({ count: 3, size: 1024, sizes: [1], engines: ['a'], flag: false, quick: false, help: false })
    expect(path.dirname(defaults.out)).to.equal(os.tmpdir())
    expect(path.basename(defaults.out)).to.match(/^kfs-bench-fio-\d{8}-\d{6}$/)
    expect(fs.existsSync(defaults.out), 'made only when written to').to.equal(false)
    expect(command.parse(['7', '--size=2M', '--rate', '0.5', '--sizes', '1K,1G', '--engines', 'b,a', '--dir', 'x', '--flag', '--quick', '--count', '9', '--out', 'o']))
      .to.deep.include({ first: 7, size: 2 * 1024 * 1024, rate: 0.5, sizes: [1024, 1024 ** 3], engines: ['b', 'a'], dir: path.resolve('x'), flag: true, quick: true, count: 9, out: 'o' })
    expect(command.parse(['--count', '9', '--quick']).count, 'later wins').to.equal(1)
    for (const [argv, message] of [
      [['--count', '0'], '--count takes a positive integer'],
      [['--count'], '--count needs a value'],
      [['--size', 'big'], '--size takes a size'],
      [['--rate', '-1'], '--rate takes a positive number'],
      [['--engines', 'a,c'], '--engines: unknown value c (known: a, b)'],
      [['--flag=1'], '--flag takes no value'],
      [['--bogus'], 'unknown argument --bogus (see --help)'],
      [['1', '2'], 'unknown argument 2 (see --help)']
    ]) expect(() => command.parse(argv), argv.join(' ')).to.throw(UsageError, message)
    const usage = command.usage()
    expect(usage).to.contain('--count N').and.contain('(default: 3)').and.contain('--engines LIST').and.contain('--quick')
    for (const line of usage.split('\n')) expect(line.length, line).to.be.at.most(100)
  })
})

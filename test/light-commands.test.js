'use strict'

// A process that uses a store through the process holding it (lib/share/) loads none of
// the store's own code: the local backend, its shards, LevelDB and its binding. A `kfs`
// command beside a holder is then little more than Node starting (its CPU is measured by
// perf/probes/light-commands.js).
const { expect } = require('chai')
const fs = require('node:fs')
const path = require('node:path')
const { spawn } = require('node:child_process')
const { useCli } = require('./cli-harness')
const { holder, ROOT } = require('./share-harness')

const PRELOAD = path.join(__dirname, 'fixtures', 'loaded-modules.js')

// The store's own code: the files of its modules, relative to ROOT (leveldown wherever
// node_modules leads).
const STORE_CODE = [/(^|\/)node_modules\/leveldown\//, /^lib\/store\/local\.js$/, /^lib\/data\/(digester|read-ahead)\.js$/, /^lib\/shard\//, /^lib\/leveldb\/(leveldb|open)\.js$/, /^lib\/share\/server\.js$/, /^lib\/maintenance\//]

// What only the local backend or freeing large buffers needs (node:worker_threads, for
// the digest thread and base/freed.js): not a short command's through a holder.
const NOT_FOR_SHORT = ['builtin:worker_threads']

// The lines fixtures/loaded-modules.js wrote to `list`.
const linesOf = (list) => fs.readFileSync(list, 'utf8').split('\n').filter(Boolean)

// The files of the modules a process loaded, relative to ROOT.
const filesIn = (list) => linesOf(list).filter((line) => path.isAbsolute(line)).map((file) => path.relative(ROOT, file))

// The modules of the store's own code that a process loaded.
const storeCodeIn = (list) => filesIn(list).filter((file) => STORE_CODE.some((code) => code.test(file)))

// The CLI's modules of commands other than `name` (lib/cli/commands.js loads each when
// it runs), and the file a get writes to (write-file.js), that a process loaded.
const OTHER_COMMANDS = ['put', 'metrics', 'top', 'top-view', 'write-file'].map((name) => `lib/cli/${name}.js`)
const otherCommandsIn = (list, name) => filesIn(list).filter((file) => OTHER_COMMANDS.includes(file) && file !== `lib/cli/${name}.js`)

// What of NOT_FOR_SHORT a process loaded.
const notForShortIn = (list) => linesOf(list).filter((line) => NOT_FOR_SHORT.includes(line))

describe('commands beside a holder load none of the store\'s code', function () {
  const c = useCli()
  let held

  // Runs `kfs args...` with fixtures/loaded-modules.js preloaded; resolves to its result
  // and the store's modules it loaded.
  async function loading (args) {
    const list = path.join(c.t.dir, 'loaded')
    const result = await c.cli(args, { env: { NODE_OPTIONS: `--require ${JSON.stringify(PRELOAD)}`, KFS_TEST_LOADED: list } })
    return { ...result, loaded: storeCodeIn(list), extra: notForShortIn(list), others: otherCommandsIn(list, args[0]) }
  }

  beforeEach(async () => {
    const put = await c.cli(['put', '--key', 'small', '-'], { input: 'a small file\n' })
    expect(put.stderr).to.equal('')
  })

  // Stopped in each test: useTmp's afterEach, defined first, removes the store first.
  async function besideHolder (test) {
    held = await holder(c.db)
    try {
      await test()
    } finally {
      await held.stop()
    }
  }

  it('kfs get, stat, exists, list and metrics, each through the holder', () => besideHolder(async () => {
    for (const args of [['get', 'small'], ['stat', 'small'], ['exists', 'small'], ['list'], ['metrics']]) {
      const { code, stdout, stderr, loaded, extra, others } = await loading(args)
      expect({ code, stderr }, args.join(' ')).to.deep.equal({ code: 0, stderr: '' })
      expect(loaded, args.join(' ')).to.deep.equal([])
      expect(extra, args.join(' ')).to.deep.equal([])
      expect(others, args.join(' ')).to.deep.equal([])
      if (args[0] === 'get') expect(stdout.toString()).to.equal('a small file\n')
    }
  }))

  it('a program that requires kfs and uses a store another process holds', () => besideHolder(async () => {
    const list = path.join(c.t.dir, 'loaded')
    const script = `
      const store = require(process.argv[1])(process.argv[2])
      ;(async () => {
        const text = String(await store.readFile('small'))
        const found = await store.exists('small')
        const { size } = await store.stat('small')
        const names = []
        for await (const { name } of store.list()) names.push(name)
        console.log(JSON.stringify({ text, found, size, names, heldBy: store.heldBy }))
        await store.close()
      })()`
    const child = spawn(process.execPath, ['--require', PRELOAD, '-e', script, ROOT, c.db], { stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, KFS_TEST_LOADED: list } })
    let out = ''
    child.stdout.on('data', (d) => { out += d })
    expect(await new Promise((resolve) => child.once('exit', resolve))).to.equal(0)
    expect(JSON.parse(out)).to.deep.equal({ text: 'a small file\n', found: true, size: 13, names: ['small'], heldBy: held.child.pid })
    expect(storeCodeIn(list)).to.deep.equal([])
    expect(notForShortIn(list)).to.deep.equal([])
  }))

  it('sees the store\'s code where a command opens the store itself (no holder)', async () => {
    const { code, loaded } = await loading(['stat', 'small'])
    expect(code).to.equal(0)
    expect(loaded).to.include.members(['lib/store/local.js', 'lib/leveldb/leveldb.js'])
    expect(loaded.some((file) => STORE_CODE[0].test(file)), 'leveldown loaded').to.equal(true)
  })
})

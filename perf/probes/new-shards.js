'use strict'

// What a new shard costs (lib/shard/create.js, template.js): shards made one after
// another with LevelDB and from the template, and a new store's first small files
// (the target: 1,000 in under 1 s) next to its floors, perf/probes/costs.js's `first`
// job: 256 raw LevelDBs made when their first file comes, and all made at once. Each
// case runs in a process of its own, rounds alternating, so that drift hits all.

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { execFileSync } = require('node:child_process')
const { median } = require('../harness/stats')
const { cli, parseCommandLine, teeOutput } = require('../harness/script')

const COMMAND = cli(__filename, {
  options: [
    { name: '--shards', type: 'count', default: 128, help: 'shards made one after another, each way' },
    { name: '--files', type: 'count', default: 1000, help: 'a new store\'s first small files' },
    { name: '--rounds', type: 'count', default: 3, help: 'rounds' },
    { name: '--dir', type: 'string', arg: 'DIR', default: process.env.KFS_PERF_DIR || os.tmpdir(), shown: '$KFS_PERF_DIR, else the temp dir', help: 'where the data goes' }
  ]
})
const since = (start) => Number(process.hrtime.bigint() - start) / 1e6

const cases = {
  // ms per shard, `shards` made one after another, from the template or not.
  async shards ({ dir, shards, template }) {
    const { createShard, makeTemplate } = require('../../lib/shard/create')
    const tmp = path.join(dir, 'tmp')
    fs.mkdirSync(tmp, { recursive: true })
    const files = template ? await makeTemplate(tmp) : undefined
    const start = process.hrtime.bigint()
    for (let i = 0; i < shards; i++) await createShard(path.join(dir, `${String(i).padStart(3, '0')}.s`), tmp, files)
    return since(start) / shards
  },
  // ms for a new store's first `files` small files, each awaited, after its open.
  async files ({ dir, files }) {
    const store = require('../..')(dir)
    await store.open()
    const start = process.hrtime.bigint()
    for (let i = 0; i < files; i++) await store.writeFile(`small-${i}`, Buffer.alloc(1024, i))
    const ms = since(start)
    await store.close()
    return ms
  }
}

const COSTS = path.join(__dirname, 'costs.js')

function inChild (name, options, dir, script = __filename) {
  fs.rmSync(dir, { recursive: true, force: true })
  fs.mkdirSync(dir, { recursive: true })
  try {
    return JSON.parse(execFileSync(process.execPath, [script, '--child', JSON.stringify({ name, ...options, dir })], { encoding: 'utf8' }))
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

async function main (args) {
  if (args.child) {
    process.stdout.write(JSON.stringify(await cases[args.child.name](args.child)))
    return
  }
  fs.mkdirSync(args.dir, { recursive: true })
  const root = fs.mkdtempSync(path.join(args.dir, 'kfs-new-shards-'))
  const place = (name) => path.join(root, name)
  try {
    console.log(`# perf/probes/new-shards.js: ${args.shards} shards made one after another, a new store's first ${args.files} small files, ${args.rounds} rounds`)
    console.log('| round | ms per shard, LevelDB | ms per shard, template | template / LevelDB | first files, s | raw made on first use, s | raw made at once, s |')
    console.log('|---|---|---|---|---|---|---|')
    const firsts = {
      kfs: () => inChild('files', { files: args.files }, place('store')),
      raw: () => inChild('first', { engine: 'raw', ahead: false, shards: 256, files: args.files }, place('raw'), COSTS),
      rawAhead: () => inChild('first', { engine: 'raw', ahead: true, shards: 256, files: args.files }, place('raw'), COSTS)
    }
    const seconds = { kfs: [], raw: [], rawAhead: [] }
    for (let round = 1; round <= args.rounds; round++) {
      const built = inChild('shards', { shards: args.shards, template: false }, place('leveldb'))
      const copied = inChild('shards', { shards: args.shards, template: true }, place('template'))
      const names = Object.keys(firsts)
      for (const name of [...names.slice(round % 3), ...names.slice(0, round % 3)]) seconds[name].push(firsts[name]() / 1000)
      const [first, raw, rawAhead] = names.map((name) => seconds[name][round - 1].toFixed(2))
      console.log(`| ${round} | ${built.toFixed(2)} | ${copied.toFixed(2)} | ${(copied / built).toFixed(2)} | ${first} | ${raw} | ${rawAhead} |`)
    }
    const summary = (name) => `${median(seconds[name]).toFixed(2)} s (${Math.min(...seconds[name]).toFixed(2)}-${Math.max(...seconds[name]).toFixed(2)})`
    console.log(`first files: kfs ${summary('kfs')}, raw made on first use ${summary('raw')}, raw made at once ${summary('rawAhead')}; medians of ${args.rounds} rounds`)
    console.log(`(target: a new store's first 1,000 small files in under 1 s)`)
  } finally {
    fs.rmSync(root, { recursive: true, force: true })
  }
}

const args = parseCommandLine(COMMAND)
if (!args.child) teeOutput(args, COMMAND)
main(args).catch((err) => {
  process.stderr.write(`perf/probes/new-shards.js: ${err.message}\n`)
  process.exitCode = 1
})

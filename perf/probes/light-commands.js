'use strict'

// The CPU of the short `kfs` commands an operator runs every second beside a storage
// node: `kfs stat`, `kfs exists` and `kfs get` of a small file, `kfs metrics`, `kfs stat`
// of the store (usage) and `kfs list`, each a process of its own. Beside a holder (a
// process of its own holding a store of --files files), the command uses the store through it (lib/share/); with no holder, it opens
// the store itself, for reference. Each command is run --runs times each way; its CPU
// (user + system, as the kernel accounts the finished process: bash's `time`) and its
// time from start to exit are given per call as median and quartiles. The store is
// filled before the clock.
//
// The piece workload with an operator running `kfs stat` and `kfs list` every second
// beside the node: `npm run benchmark:pieces -- --engines kfs,kfs-operator`.

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const crypto = require('node:crypto')
const { spawn } = require('node:child_process')
const { hold } = require('../harness/child')
const { cli, runScript, fmt, quickMark, inFlight, KiB } = require('../harness/script')
const { percentile } = require('../harness/stats')

const ROOT = path.join(__dirname, '..', '..')
const CLI = path.join(ROOT, 'bin', 'kfs.js')
const COMMANDS = ['stat', 'exists', 'get', 'metrics', 'usage', 'list']

const COMMAND = cli(__filename, {
  options: [
    { name: '--files', type: 'count', default: 10000, help: 'files in the store (what `kfs list` lists)' },
    { name: '--size', type: 'size', arg: 'BYTES', default: KiB, shown: '1K', help: 'their size (what `kfs get` reads)' },
    { name: '--runs', type: 'count', default: 20, help: 'runs of each command, beside a holder and with none' },
    { name: '--commands', type: 'list', values: COMMANDS, default: COMMANDS, help: `the commands, comma-separated: ${COMMANDS.join(', ')}` },
    { name: '--dir', type: 'string', arg: 'DIR', default: process.env.KFS_PERF_DIR || os.tmpdir(), shown: '$KFS_PERF_DIR, else the temp dir', help: 'where the store goes: a new directory in it, removed at the end' },
    { name: '--quick', type: 'flag', sets: { files: 20, runs: 2, quick: true }, help: 'few files and runs, for the tests: proves the script runs, measures nothing' }
  ]
})

// The arguments of `name` on a store whose files include `key`.
// usage: `kfs stat` of the store, as against `stat`, of a file.
const ARGS = { stat: (key) => ['stat', key], exists: (key) => ['exists', key], get: (key) => ['get', key], metrics: () => ['metrics'], usage: () => ['stat'], list: () => ['list'] }

// Runs the kfs command on the store, its output thrown away; resolves to { cpu, wall }
// in ms. bash's `time` gives the CPU of the process it waited for, in ms.
function kfs (dir, args) {
  const script = 'TIMEFORMAT="%3U %3S"; time "$@" >/dev/null 2>&3'
  const start = process.hrtime.bigint()
  const child = spawn('bash', ['-c', script, 'bash', process.execPath, CLI, '-d', dir, ...args], { stdio: ['ignore', 'ignore', 'pipe', 'pipe'] })
  let timing = ''
  let stderr = ''
  child.stdio[2].on('data', (d) => { timing += d })
  child.stdio[3].on('data', (d) => { stderr += d })
  return new Promise((resolve, reject) => {
    child.once('error', reject)
    child.once('close', (code) => {
      const wall = Number(process.hrtime.bigint() - start) / 1e6
      if (code !== 0) return reject(new Error(`kfs ${args.join(' ')} exited with ${code}: ${stderr.trim()}`))
      const [user, system] = timing.trim().split(/\s+/).map(Number)
      resolve({ cpu: (user + system) * 1000, wall })
    })
  })
}

// A store of `files` files of `size` bytes under random 32-byte keys, as a storage node
// names its pieces; resolves to one of the keys.
async function fill (dir, files, size) {
  const store = require(ROOT)(dir, { create: true, openAhead: false })
  const data = crypto.randomBytes(size)
  const keys = Array.from({ length: files }, () => crypto.randomBytes(32).toString('hex'))
  try {
    await inFlight(16, keys, (key) => store.writeFile(key, data))
  } finally {
    await store.close()
  }
  return keys[0]
}

// Each command `runs` times, in turn; resolves to { command: [{ cpu, wall }] }.
async function measure (dir, key, commands, runs) {
  const results = Object.fromEntries(commands.map((name) => [name, []]))
  for (let run = 0; run < runs; run++) {
    for (const name of commands) results[name].push(await kfs(dir, ARGS[name](key)))
  }
  return results
}

// "median (q1–q3)" of `xs`.
const spread = (xs) => `${fmt(percentile(xs, 50))} (${fmt(percentile(xs, 25))}–${fmt(percentile(xs, 75))})`

async function main (args) {
  fs.mkdirSync(args.dir, { recursive: true })
  const base = fs.mkdtempSync(path.join(args.dir, 'kfs-light-'))
  const store = path.join(base, 'store')
  let beside, alone
  try {
    const key = await fill(store, args.files, args.size)
    process.stderr.write('perf/probes/light-commands.js: beside a holder\n')
    const stop = await hold(store)
    try {
      beside = await measure(store, key, args.commands, args.runs)
    } finally {
      await stop()
    }
    process.stderr.write('perf/probes/light-commands.js: no holder\n')
    alone = await measure(store, key, args.commands, args.runs)
  } finally {
    fs.rmSync(base, { recursive: true, force: true })
  }
  const lines = [
    `${fmt(args.runs)} runs of each command each way, on a store of ${fmt(args.files)} files of ${fmt(args.size)} bytes; per call, ms: median (quartiles); load average at the end ${os.loadavg().map((x) => x.toFixed(2)).join(' ')}${args.quick ? `; ${quickMark('runs')}` : ''}`,
    '',
    '| command | CPU beside a holder | CPU, no holder | time beside a holder | time, no holder |',
    '|---|---:|---:|---:|---:|'
  ]
  for (const name of args.commands) {
    const [held, own] = [beside[name], alone[name]]
    const shown = `\`kfs ${ARGS[name]('KEY').join(' ')}\``
    lines.push(`| ${shown} | ${spread(held.map((r) => r.cpu))} | ${spread(own.map((r) => r.cpu))} | ${spread(held.map((r) => r.wall))} | ${spread(own.map((r) => r.wall))} |`)
  }
  process.stdout.write(lines.join('\n') + '\n')
}

runScript(COMMAND, { cases: {}, main, tee: true })

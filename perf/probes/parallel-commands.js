'use strict'

// `kfs` commands run at once on a store that no long-lived process holds, as
// `xargs -P` runs them: each command holds the store in turn, or uses it through the
// one that does (lib/share/). Counts the commands that fail: --parallel `kfs put FILE`
// on a new store, then as many mixed `get`, `stat`, `exists` and `list`, --runs times.
// Then a takeover storm: four processes read files in a loop while the one holding the
// store is killed (SIGKILL) every 0.5 to 1.5 s and another takes its place, for
// --storm seconds; counts the reads of the others that fail.

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const crypto = require('node:crypto')
const { spawn } = require('node:child_process')
const { cli, runScript, fmt, quickMark } = require('../harness/script')
const { lockHolder } = require('../../lib/leveldb/log-guard')

const ROOT = path.join(__dirname, '..', '..')
const CLI = path.join(ROOT, 'bin', 'kfs.js')

const COMMAND = cli(__filename, {
  options: [
    { name: '--parallel', type: 'count', default: 32, help: 'commands at once' },
    { name: '--runs', type: 'count', default: 10, help: 'runs of each kind' },
    { name: '--storm', type: 'number', arg: 'SECONDS', default: 30, help: 'how long holders are killed under reading processes (0: no storm)' },
    { name: '--dir', type: 'string', arg: 'DIR', default: process.env.KFS_PERF_DIR || os.tmpdir(), shown: '$KFS_PERF_DIR, else the temp dir', help: 'where the stores go: a new directory in it, removed at the end' },
    { name: '--quick', type: 'flag', sets: { parallel: 4, runs: 1, storm: 2, quick: true }, help: 'few commands, for the tests: proves the script runs, measures nothing' }
  ]
})

// Runs the kfs command on the store; resolves to its failure (a line), or undefined.
function kfs (dir, args) {
  const child = spawn(process.execPath, [CLI, '-d', dir, ...args], { stdio: ['ignore', 'ignore', 'pipe'] })
  let stderr = ''
  child.stderr.on('data', (d) => { stderr += d })
  return new Promise((resolve, reject) => {
    child.once('error', reject)
    child.once('exit', (code) => resolve(code === 0 && !stderr ? undefined : `kfs ${args[0]}: exit ${code}: ${stderr.trim().split('\n')[0]}`))
  })
}

// The failures of `commands` (argument lists) run at once.
async function atOnce (store, commands) {
  return (await Promise.all(commands.map((args) => kfs(store, args)))).filter(Boolean)
}

// A process that uses the store at `dir` and reads `keys` in turn until its stdin ends,
// printing { reads, failures } as a JSON line every 100 ms and at its end; the first
// to open the store holds it and serves the others.
function member (dir, keys) {
  const script = `
    const store = require(process.argv[1])(process.argv[2])
    const keys = process.argv.slice(3)
    let stop = false
    let reads = 0
    const failures = []
    const report = () => console.log(JSON.stringify({ reads, failures }))
    const timer = setInterval(report, 100)
    process.stdin.on('end', () => { stop = true }).resume()
    ;(async () => {
      for (let i = 0; !stop; i++) {
        await store.readFile(keys[i % keys.length]).then(() => { reads++ }, (err) => { reads++; failures.push(err.code + ': ' + err.message) })
      }
      clearInterval(timer)
      report()
      await store.close()
    })()`
  const child = spawn(process.execPath, ['-e', script, ROOT, dir, ...keys], { stdio: ['pipe', 'pipe', 'inherit'] })
  const seen = { reads: 0, failures: [] }
  let rest = ''
  child.stdout.on('data', (d) => {
    const lines = (rest + d).split('\n')
    rest = lines.pop()
    if (lines.length) Object.assign(seen, JSON.parse(lines[lines.length - 1]))
  })
  const exited = new Promise((resolve) => child.once('exit', resolve))
  return { pid: child.pid, seen, stop: () => { child.stdin.end(); return exited.then(() => seen) }, kill: () => { child.kill('SIGKILL'); return exited } }
}

// Four members read the store while whichever holds it is killed (SIGKILL) every 0.5
// to 1.5 s and replaced by a new member. The reads of the member killed are not
// counted: those of the others, which each lose their holder, are.
async function storm (store, keys, seconds) {
  const members = new Map()
  const add = () => { const m = member(store, keys); members.set(m.pid, m) }
  for (let i = 0; i < 4; i++) add()
  let kills = 0
  for (const end = Date.now() + seconds * 1000; Date.now() < end;) {
    await new Promise((resolve) => setTimeout(resolve, 500 + Math.random() * 1000))
    const pid = await lockHolder(path.join(store, 'state'))
    const held = members.get(pid)
    if (!held) continue
    members.delete(pid)
    await held.kill()
    kills++
    add()
  }
  const results = await Promise.all([...members.values()].map((m) => m.stop()))
  return { reads: results.reduce((sum, r) => sum + r.reads, 0), failures: results.flatMap((r) => r.failures), kills }
}

async function main (args) {
  fs.mkdirSync(args.dir, { recursive: true })
  const base = fs.mkdtempSync(path.join(args.dir, 'kfs-parallel-'))
  const lines = []
  const failed = []
  try {
    const inputs = Array.from({ length: args.parallel }, (_, i) => {
      const file = path.join(base, `in${i}`)
      fs.writeFileSync(file, crypto.randomBytes(1000 + i * 4096))
      return file
    })
    const keys = inputs.map((file) => crypto.createHash('sha256').update(fs.readFileSync(file)).digest('hex'))
    const mixed = keys.map((key, i) => [['get', key, '/dev/null'], ['stat', key], ['exists', key], ['list']][i % 4])
    const counts = { put: [], mixed: [] }
    for (let run = 0; run < args.runs; run++) {
      process.stderr.write(`perf/probes/parallel-commands.js: run ${run + 1}\n`)
      const store = path.join(base, `store${run}`)
      for (const [kind, commands] of [['put', inputs.map((file) => ['put', file])], ['mixed', mixed]]) {
        const failures = await atOnce(store, commands)
        counts[kind].push(failures.length)
        failed.push(...failures)
      }
    }
    lines.push(
      `${args.runs} run${args.runs === 1 ? '' : 's'} of ${args.parallel} commands at once, each on a new store with no long-lived holder; load average at the end ${os.loadavg().map((x) => x.toFixed(2)).join(' ')}${args.quick ? `; ${quickMark('runs')}` : ''}`,
      '',
      '| commands | failed, each run | failed in all |',
      '|---|---|---:|',
      `| \`kfs put FILE\` | ${counts.put.join(', ')} | ${fmt(counts.put.reduce((a, b) => a + b, 0))} of ${fmt(args.runs * args.parallel)} |`,
      `| \`get\`, \`stat\`, \`exists\`, \`list\` | ${counts.mixed.join(', ')} | ${fmt(counts.mixed.reduce((a, b) => a + b, 0))} of ${fmt(args.runs * args.parallel)} |`
    )
    if (args.storm > 0) {
      const { reads, failures, kills } = await storm(path.join(base, `store${args.runs - 1}`), keys, args.storm)
      failed.push(...failures)
      lines.push('', `Takeover storm, ${fmt(args.storm)} s: the holder killed ${kills} times, each time under 3 other processes reading; ${fmt(failures.length)} of ${fmt(reads)} of their reads failed.`)
    }
    if (failed.length) lines.push('', 'Failures (the first 10):', '', ...failed.slice(0, 10).map((line) => `- ${line}`))
  } finally {
    fs.rmSync(base, { recursive: true, force: true })
  }
  process.stdout.write(lines.join('\n') + '\n')
}

runScript(COMMAND, { cases: {}, main, tee: true })

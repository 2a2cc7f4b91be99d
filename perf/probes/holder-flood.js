'use strict'

// A holder (lib/share/server.js) under a flood of connections that never finish a
// request: a burst of --connections opened at once to its socket while the holder is
// stopped (SIGSTOP: every one waits in the listen backlog), a third sending nothing, a
// third half a request's headers, a third a JSON call's headers and half its body. The
// holder is a process of its own whose descriptor limit is --nofile (through prlimit;
// 0 leaves it as it is). Once it goes on (SIGCONT), another process's store stats a
// file through the holder and the holder writes --writes files itself. Then, after
// --wait seconds, how many of the flood's connections the holder still keeps.
//
// Target: every connection queued, the stat answered and every write made.

const fs = require('node:fs')
const os = require('node:os')
const net = require('node:net')
const path = require('node:path')
const { spawn, spawnSync } = require('node:child_process')
const { cli, runScript, fmt, quickMark } = require('../harness/script')

const ROOT = path.join(__dirname, '..', '..')

const COMMAND = cli(__filename, {
  options: [
    { name: '--connections', type: 'count', default: 1000, help: 'connections opened at once' },
    { name: '--nofile', type: 'string', arg: 'N', default: '160', help: 'the holder\'s descriptor limit (0: as this process\'s)' },
    { name: '--writes', type: 'count', default: 40, help: 'files the holder writes during the flood, each in a shard of its own' },
    { name: '--wait', type: 'number', arg: 'S', default: 70, help: 'seconds after which the flood\'s connections still open are counted' },
    { name: '--dir', type: 'string', arg: 'DIR', default: process.env.KFS_PERF_DIR || os.tmpdir(), shown: '$KFS_PERF_DIR, else the temp dir', help: 'where the store goes: a new directory in it, removed at the end' },
    { name: '--quick', type: 'flag', sets: { connections: 30, writes: 3, wait: 0.5, quick: true }, help: 'few connections, for the tests: proves the script runs, measures nothing' }
  ]
})

// The holder: opens the store and serves it; on each line of stdin, writes `writes`
// files and prints what they gave ({ ok, failed: { CODE: n } }) and its open descriptors.
const HOLDER = `
  const fs = require('node:fs')
  const store = require(process.argv[1])(process.argv[2])
  const writes = Number(process.argv[3])
  let round = 0
  store.open().then(() => console.log(JSON.stringify({ holding: fs.readdirSync('/proc/self/fd').length })), (err) => { console.error(err.message); process.exit(1) })
  process.stdin.setEncoding('utf8').on('data', async () => {
    round++
    const results = await Promise.allSettled(Array.from({ length: writes }, (_, i) => store.writeFile('w' + round + '-' + i, Buffer.alloc(4096, i))))
    const failed = {}
    for (const r of results) if (r.status === 'rejected') failed[r.reason.code] = (failed[r.reason.code] || 0) + 1
    console.log(JSON.stringify({ ok: results.filter((r) => r.status === 'fulfilled').length, failed, fds: fs.readdirSync('/proc/self/fd').length }))
  })
  process.stdin.on('end', () => store.close().then(() => process.exit(0)))`

// A holder process; resolves to { ask(): the next line it prints, as JSON, after a line
// sent, stop() }.
function hold (dir, { nofile, writes }) {
  const limited = Number(nofile) > 0
  if (limited && spawnSync('prlimit', ['--version']).error) throw new Error('--nofile needs prlimit (util-linux); give --nofile 0 to run without it')
  const argv = [process.execPath, '-e', HOLDER, ROOT, dir, String(writes)]
  const child = limited ? spawn('prlimit', [`--nofile=${nofile}:${nofile}`, '--', ...argv], { stdio: ['pipe', 'pipe', 'inherit'] }) : spawn(argv[0], argv.slice(1), { stdio: ['pipe', 'pipe', 'inherit'] })
  const exited = new Promise((resolve) => child.once('exit', resolve))
  const lines = []
  const waiting = []
  let rest = ''
  child.stdout.setEncoding('utf8').on('data', (text) => {
    const parts = (rest + text).split('\n')
    rest = parts.pop()
    for (const line of parts) (waiting.length ? waiting.shift() : (v) => lines.push(v))(JSON.parse(line))
  })
  const next = () => new Promise((resolve, reject) => {
    if (lines.length) return resolve(lines.shift())
    waiting.push(resolve)
    exited.then((code) => reject(new Error(`the holder exited with ${code}`)))
  })
  return next().then((first) => ({
    signal: (name) => process.kill(child.pid, name), // prlimit execs node: the same process
    first,
    ask: () => { child.stdin.write('\n'); return next() },
    stop: () => { child.stdin.end(); return exited }
  }))
}

// What connection i sends: nothing, half a request's headers, or a call's headers and
// half its body.
const PARTS = [
  '',
  'POST /v1/call/stat HTTP/1.1\r\nHost: kfs\r\nContent-Type: application/json\r\n',
  'POST /v1/call/stat HTTP/1.1\r\nHost: kfs\r\nContent-Type: application/json\r\nContent-Length: 20\r\n\r\n["w'
]

// Opens `count` connections at once; resolves once each connected or failed, to
// { sockets, failed: { CODE: n } }.
async function flood (socket, count) {
  const failed = {}
  const sockets = []
  await Promise.all(Array.from({ length: count }, (_, i) => new Promise((resolve) => {
    const s = net.connect(socket)
    s.once('connect', () => {
      sockets.push(s)
      if (PARTS[i % 3]) s.write(PARTS[i % 3])
      resolve()
    })
    s.on('error', (err) => {
      if (!sockets.includes(s)) {
        failed[err.code] = (failed[err.code] || 0) + 1
        resolve()
      }
    })
    s.on('data', () => {})
  })))
  return { sockets, failed }
}

const codes = (failed) => Object.entries(failed).map(([code, n]) => `${n} ${code}`).join(', ') || 'none'

async function main (args) {
  fs.mkdirSync(args.dir, { recursive: true })
  const base = fs.mkdtempSync(path.join(args.dir, 'kfs-flood-'))
  const dir = path.join(base, 'store')
  const kfs = require(ROOT)
  let holder
  let sockets = []
  try {
    holder = await hold(dir, args)
    const before = await holder.ask() // every shard the writes touch opened once
    holder.signal('SIGSTOP')
    const started = Date.now()
    const burst = await flood(path.join(dir, 'kfs.sock'), args.connections).finally(() => holder.signal('SIGCONT'))
    sockets = burst.sockets
    const opened = Date.now() - started
    const client = kfs(dir)
    const asked = Date.now()
    const stat = await client.stat('w1-0').then(() => 'ok', (err) => `${err.code}: ${err.message.slice(0, 120)}`)
    const statMs = Date.now() - asked
    await client.close()
    const during = await holder.ask()
    await new Promise((resolve) => setTimeout(resolve, args.wait * 1000))
    const kept = sockets.filter((s) => !s.destroyed).length
    const met = burst.sockets.length === args.connections && stat === 'ok' && during.ok === args.writes
    const lines = [
      `holder's descriptor limit ${args.nofile === '0' ? 'as this process\'s' : args.nofile}; load average at the end ${os.loadavg().map((x) => x.toFixed(2)).join(' ')}${args.quick ? `; ${quickMark('counts')}` : ''}`,
      '',
      '| what | result |',
      '|---|---|',
      `| the holder's descriptors: serving, after its first ${fmt(args.writes)} writes | ${fmt(holder.first.holding)}, ${fmt(before.fds)} |`,
      `| connections opened at once | ${fmt(args.connections)} in ${fmt(opened)} ms |`,
      `| connected | ${fmt(burst.sockets.length)} (failed: ${codes(burst.failed)}) |`,
      `| another process's stat through the holder | ${stat}, ${fmt(statMs)} ms |`,
      `| the holder's ${fmt(args.writes)} writes during the flood | ${fmt(during.ok)} ok (failed: ${codes(during.failed)}); ${fmt(during.fds)} descriptors |`,
      `| the flood's connections still open after ${args.wait} s | ${fmt(kept)} |`,
      '',
      `target: every connection queued, the stat answered, every write made: ${met ? 'met' : 'MISSED'}`
    ]
    process.stdout.write(lines.join('\n') + '\n')
  } finally {
    for (const s of sockets) s.destroy()
    if (holder) {
      holder.signal('SIGCONT')
      await holder.stop()
    }
    fs.rmSync(base, { recursive: true, force: true })
  }
}

runScript(COMMAND, { cases: {}, main, tee: true })

'use strict'

// Runs benchmark cases each in a child process of its own script: LevelDB runs every
// flush and compaction of a process on one background thread, so engines sharing a
// process would slow each other. The parent calls inChild(script, job), which starts the
// script again with `--child JSON`; there runScript() (script.js) calls serve(). The
// child writes its result as JSON on stdout; its stderr is the parent's.

const fs = require('node:fs')
const path = require('node:path')
const { spawn, execFileSync } = require('node:child_process')
const { once } = require('node:events')

const now = () => process.hrtime.bigint()
const msSince = (start) => Number(now() - start) / 1e6

// env: variables added to the child's environment.
async function inChild (script, job, { env } = {}) {
  const child = spawn(process.execPath, [script, '--child', JSON.stringify(job)], { stdio: ['ignore', 'pipe', 'inherit'], env: env && { ...process.env, ...env } })
  let out = ''
  child.stdout.on('data', (d) => (out += d))
  const [code] = await once(child, 'close') // after its stdout ended, unlike 'exit'
  if (code !== 0) throw new Error(`${job.name} (${job.engine}) failed with exit code ${code}`)
  return JSON.parse(out)
}

// In the child: runs cases[job.name](job) and writes its result, or (job.stepped) serves
// its steps.
function serve (cases, job) {
  const failed = (err) => {
    process.stderr.write(`${err.stack}\n`)
    process.exit(1)
  }
  if (job.stepped) serveSteps(cases[job.name], job, failed).catch(failed)
  else cases[job.name](job).then((result) => process.stdout.write(JSON.stringify(result)), failed)
}

// Exits once its engine is closed (a handle the engine left open must not keep it), or
// at once if the parent goes away.
async function serveSteps (make, job, failed) {
  process.on('disconnect', () => process.exit(1))
  const engine = await make(job)
  process.on('message', ({ stop }) => {
    const done = stop ? engine.close().then(() => process.exit(0)) : engine.step().then((result) => process.send({ result }))
    done.catch(failed)
  })
  process.send({ ready: true })
}

// How long a Stepped child may take to close its engine and exit when asked.
const STOP_MS = 60000

// In the parent: a child serving the steps of `job`, started at once; its stderr goes to
// the parent's, or is ignored (stderr: 'ignore').
class Stepped {
  constructor (script, job, stderr = 'inherit') {
    this.name = job.engine || job.name
    this.child = spawn(process.execPath, [script, '--child', JSON.stringify({ ...job, stepped: true })], { stdio: ['ignore', 'ignore', stderr, 'ipc'] })
    this.replies = []
    this.waiting = []
    this.child.on('message', (m) => (this.waiting.length ? this.waiting.shift().resolve(m) : this.replies.push(m)))
    // Failing to start it, or to send to it once it has gone: no reply will come.
    this.child.on('error', (err) => this.#end(this.failed || err))
    this.exited = new Promise((resolve) => this.child.on('close', (code, signal) => {
      this.#end(code === 0 ? null : new Error(`${this.name} failed with ${signal ? `signal ${signal}` : `exit code ${code}`}`))
      resolve()
    }))
  }

  // failed: the error to give for replies that will not come, or null (it exited when
  // asked to stop).
  #end (failed) {
    if (!this.failed) this.failed = failed
    for (const w of this.waiting.splice(0)) w.reject(this.#gone())
  }

  // Why no reply will come: the child failed, or it exited when asked to stop.
  #gone () {
    return this.failed || new Error(`${this.name} has exited`)
  }

  #reply () {
    if (this.replies.length) return Promise.resolve(this.replies.shift())
    if (this.failed !== undefined) return Promise.reject(this.#gone())
    return new Promise((resolve, reject) => this.waiting.push({ resolve, reject }))
  }

  ready () {
    return this.#reply()
  }

  async step () {
    if (this.failed !== undefined || !this.child.connected) throw this.#gone()
    this.child.send({ step: true }, (err) => err && this.#end(err))
    return (await this.#reply()).result
  }

  // Asks it to close its engine and exit; kills it if it has not within `ms`.
  async stop (ms = STOP_MS) {
    if (this.child.connected) this.child.send({ stop: true }, () => {})
    const timer = setTimeout(() => this.child.kill(), ms)
    await this.exited
    clearTimeout(timer)
    if (this.failed) throw this.failed
  }
}

// Starts one Stepped child per job (one after another: making an engine is not timed),
// then runs `steps` steps of each in turn, rotating who goes first; stops them all.
// Returns { name: [each step's result] }. stderr: as Stepped takes it.
async function runSteps (script, jobs, steps, { stderr } = {}) {
  const engines = []
  const results = {}
  let stopped
  try {
    for (const job of jobs) {
      engines.push(new Stepped(script, job, stderr))
      await engines.at(-1).ready()
      results[engines.at(-1).name] = []
    }
    for (let s = 0; s < steps; s++) {
      for (let i = 0; i < engines.length; i++) {
        const e = engines[(i + s) % engines.length]
        results[e.name].push(await e.step())
      }
    }
  } finally {
    stopped = await Promise.allSettled(engines.map((e) => e.stop()))
  }
  const failure = stopped.find((s) => s.status === 'rejected')
  if (failure) throw failure.reason
  return results
}

// `kfs list [shard] > /dev/null`, end to end, as a user runs it: milliseconds.
function cliList (dir, shard) {
  const start = now()
  const devNull = fs.openSync('/dev/null', 'w')
  try {
    const argv = [path.join(__dirname, '..', '..', 'bin', 'kfs.js'), 'list', '-d', dir]
    if (shard !== undefined) argv.push(String(shard))
    execFileSync(process.execPath, argv, { stdio: ['ignore', devNull, 'inherit'] })
  } finally {
    fs.closeSync(devNull)
  }
  return msSince(start)
}

// Resolves once each process of `pids` has gone `quietMs` using under 5% of a core and
// writing under 1 MiB, or after `timeoutMs`, to the milliseconds waited: an engine's
// background work (the compactions after a large unlink, a flush when it goes idle) must
// not run into another engine's turn, as the two would share the disk and the cores.
// Reads /proc: elsewhere it resolves at once.
async function quiet (pids, { quietMs = 1000, timeoutMs = 30000, everyMs = 100 } = {}) {
  const start = now()
  if (!pids.length) return 0
  const tick = 1000 / 100 // Linux's USER_HZ: CPU times in /proc are in hundredths of a second
  const window = []
  for (;;) {
    const sample = pids.map(activity)
    if (sample.includes(undefined)) return msSince(start)
    window.push({ at: msSince(start), sample })
    while (window.length > 1 && window.at(-1).at - window[1].at >= quietMs) window.shift()
    const first = window[0]
    const last = window.at(-1)
    const span = last.at - first.at
    if (span >= quietMs && pids.every((_, i) => {
      const cpuMs = (last.sample[i].cpu - first.sample[i].cpu) * tick
      return cpuMs < 0.05 * span && last.sample[i].written - first.sample[i].written < 1024 * 1024
    })) return msSince(start)
    if (msSince(start) >= timeoutMs) return msSince(start)
    await new Promise((resolve) => setTimeout(resolve, everyMs))
  }
}

// A process's CPU time (utime + stime, in ticks) and bytes written to storage so far;
// undefined where /proc does not tell (not Linux, or the process is gone).
function activity (pid) {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8')
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ') // fields from the 3rd
    const io = fs.readFileSync(`/proc/${pid}/io`, 'utf8')
    return { cpu: Number(fields[11]) + Number(fields[12]), written: Number(/^write_bytes: (\d+)/m.exec(io)[1]) }
  } catch {
    return undefined
  }
}

// A process holding the store until stop(); resolves once it serves.
function hold (dir) {
  const script = `
    const store = require(process.argv[1])(process.argv[2])
    store.open().then(() => console.log('holding'), (err) => { console.error(err.message); process.exit(1) })
    process.stdin.resume()
    process.stdin.on('end', () => store.close().then(() => process.exit(0)))`
  const child = spawn(process.execPath, ['-e', script, path.join(__dirname, '..', '..'), dir], { stdio: ['pipe', 'pipe', 'inherit'] })
  return new Promise((resolve, reject) => {
    child.stdout.once('data', () => resolve(() => { child.stdin.end(); return new Promise((resolve) => child.once('exit', resolve)) }))
    child.once('exit', (code) => reject(new Error(`the holder exited with ${code}`)))
  })
}

module.exports = { hold, inChild, serve, runSteps, Stepped, cliList, quiet, now, msSince }

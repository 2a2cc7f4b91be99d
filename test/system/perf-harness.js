'use strict'

// perf/ scripts run as child processes by the tests, which a test that runs out of time
// must not leave running: `const { tmp, run } = usePerf()` in a describe gives a fresh
// directory per test (useTmp) and run(script, argv), which resolves to { stdout, stderr }
// or rejects as execFile does (err.code: the exit code; err.stdout, err.stderr).
//
// A script still running near the end of its test's timeout is killed, with every
// process it started (engines run in processes of their own), and run() rejects saying
// that KFS_TEST_SLOWDOWN scales the bound: mocha's own timeout would leave them writing
// into the directory, which then could not be removed (ENOTEMPTY), failing the file's
// other tests. After each test, any script still running is killed the same way before
// the directory is removed.
const fs = require('node:fs')
const path = require('node:path')
const { execFile } = require('node:child_process')
const { useTmp, scaled, SLOWDOWN } = require('../helpers')

const PERF = path.join(__dirname, '..', '..', 'perf')

// The process `pid` and all its descendants, each stopped as it is found so that none
// starts another meanwhile (Linux: /proc/PID/task/TID/children).
function stopTree (pid) {
  const found = []
  const visit = (p) => {
    try {
      process.kill(p, 'SIGSTOP')
    } catch {
      return // gone already
    }
    found.push(p)
    let tasks = []
    try {
      tasks = fs.readdirSync(`/proc/${p}/task`)
    } catch { /* gone meanwhile */ }
    for (const task of tasks) {
      let children = ''
      try {
        children = fs.readFileSync(`/proc/${p}/task/${task}/children`, 'utf8')
      } catch { /* gone meanwhile */ }
      for (const child of children.split(' ').filter(Boolean)) visit(Number(child))
    }
  }
  visit(pid)
  return found
}

// Whether `pid` has ended (a zombie has: it holds no files).
function ended (pid) {
  try {
    return fs.readFileSync(`/proc/${pid}/stat`, 'utf8').replace(/^.*\) /, '')[0] === 'Z'
  } catch {
    return true
  }
}

// Kills `child` and its descendants, and resolves once every one of them has ended.
async function killTree (child, exited) {
  const pids = stopTree(child.pid)
  for (const pid of pids) {
    try {
      process.kill(pid, 'SIGKILL')
    } catch { /* gone already */ }
  }
  await exited
  const until = Date.now() + scaled(10000)
  while (pids.some((pid) => !ended(pid)) && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 20))
}

function usePerf () {
  const running = new Set() // { child, exited }
  let test
  let started
  // Registered before useTmp's: mocha runs a describe's afterEach hooks in order, so
  // the scripts are gone before the directory is removed.
  beforeEach(function () {
    test = this.currentTest
    started = Date.now()
  })
  afterEach(async () => {
    const left = [...running]
    running.clear()
    await Promise.all(left.map(({ child, exited }) => killTree(child, exited)))
  })
  const tmp = useTmp()

  // The script `script` (a file name in perf/, or a path) with `argv`.
  const run = async (script, argv = []) => {
    const file = path.isAbsolute(script) ? script : path.join(PERF, script)
    const timeout = test.timeout()
    // Time enough left to kill, clean up and report before mocha's own timeout.
    const deadline = started + timeout - Math.min(scaled(5000), timeout / 10)
    let child
    const exited = new Promise((resolve) => {
      child = execFile(process.execPath, [file, ...argv], { maxBuffer: 64 * 1024 * 1024 }, (err, stdout, stderr) => {
        resolve(err ? Object.assign(err, { stdout, stderr }) : { stdout, stderr })
      })
    })
    const entry = { child, exited }
    running.add(entry)
    let timer
    const late = new Promise((resolve) => {
      timer = setTimeout(() => resolve(entry), Math.max(0, deadline - Date.now()))
    })
    const outcome = await Promise.race([exited, late])
    clearTimeout(timer)
    running.delete(entry)
    if (outcome === entry) {
      await killTree(child, exited)
      const name = `${path.relative(path.join(PERF, '..'), file)}${argv.length ? ` ${argv.join(' ')}` : ''}`
      throw new Error(`${name} was still running ${Date.now() - started} ms into a test bounded at ${timeout} ms: killed it and the processes it started. On a slow or busy machine, KFS_TEST_SLOWDOWN=3 (now ${SLOWDOWN}) scales every time bound of the tests.`)
    }
    if (outcome instanceof Error) throw outcome
    return outcome
  }
  return { tmp, run }
}

module.exports = { usePerf, PERF }

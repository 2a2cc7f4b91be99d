'use strict'

// Records a workload under recordfs.py, then builds and checks its crash states
// (states.js), each in a fresh process (check.js).
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { spawn, spawnSync, execFileSync } = require('node:child_process')
const { MODELS, readLog, crashStates, materialize, expectations, judge } = require('./states')
const { scaled, toFormat2 } = require('../helpers') // KFS_TEST_SLOWDOWN

const PYTHON = '/usr/bin/python3' // Debian's, which has Debian's fusepy
const RECORDFS = path.join(__dirname, 'recordfs.py')

// Why crash states cannot be recorded here, or undefined. Installs Debian's fusepy
// where root can and it is missing.
function unavailable () {
  if (process.platform !== 'linux') return 'needs Linux'
  if (process.getuid() !== 0) return 'needs root to mount a FUSE filesystem'
  if (!fs.existsSync('/dev/fuse')) return 'needs /dev/fuse'
  const hasFusepy = () => fs.existsSync(PYTHON) && spawnSync(PYTHON, ['-c', 'import fusepy'], { stdio: 'ignore' }).status === 0
  if (!hasFusepy()) {
    const apt = spawnSync('apt-get', ['install', '-y', '-q', 'python3-fusepy'], { encoding: 'utf8', env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } })
    if (!hasFusepy()) return `needs Debian's python3-fusepy (apt-get install python3-fusepy: ${apt.error ? apt.error.message : (apt.stderr || '').trim().split('\n').pop()})`
  }
  return undefined
}

function mounted (mnt) {
  return fs.readFileSync('/proc/mounts', 'utf8').split('\n').some((line) => line.split(' ')[1] === mnt)
}

function sleep (ms) {
  return new Promise((resolve) => setTimeout(resolve, ms))
}

// Mounts recordfs over `back` at `mnt`, logging to `logDir`; resolves to unmount().
async function mount (back, mnt, logDir) {
  const stderr = fs.openSync(path.join(logDir, 'recordfs.err'), 'w')
  const child = spawn(PYTHON, [RECORDFS, back, mnt, logDir], { stdio: ['ignore', stderr, stderr] })
  fs.closeSync(stderr)
  const exited = new Promise((resolve) => child.on('exit', resolve))
  const unmount = async () => {
    for (let tries = 0; mounted(mnt); tries++) {
      // Busy while a process that used it is exiting: retried, then detached.
      if (tries > 60) throw new Error(`${mnt} could not be unmounted`)
      const result = spawnSync('umount', tries < 50 ? [mnt] : ['-l', mnt], { stdio: 'ignore' })
      if (result.status !== 0) await sleep(100)
    }
    const timer = setTimeout(() => child.kill('SIGKILL'), scaled(10000))
    await exited
    clearTimeout(timer)
  }
  for (let waited = 0; !mounted(mnt); waited += 20) {
    if (child.exitCode !== null || waited > 20000) {
      child.kill('SIGKILL')
      await exited
      await unmount() // a mount whose server died
      throw new Error(`recordfs did not mount: ${fs.readFileSync(path.join(logDir, 'recordfs.err'), 'utf8')}`)
    }
    await sleep(20)
  }
  return unmount
}

function node (script, spec, timeout) {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [path.join(__dirname, script), JSON.stringify(spec)], { stdio: ['ignore', 'pipe', 'pipe'] })
    let out = ''
    let err = ''
    child.stdout.on('data', (d) => { out += d })
    child.stderr.on('data', (d) => { err += d })
    const timer = setTimeout(() => child.kill('SIGKILL'), timeout)
    child.on('close', (code, signal) => {
      clearTimeout(timer)
      resolve({ code, signal, out, err })
    })
  })
}

// Records one workload: { engine, store (path under the mount's root), options, steps,
// prepare (steps run before recording, durable at its start), older (2: the prepared
// store rewritten as format 2 wrote it) }. Resolves to
// { log, outcomes, before, snapshot, root }; the caller removes root.
async function record (workload) {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'kfs-crash-'))
  try {
    return await recordIn(root, workload)
  } catch (err) {
    fs.rmSync(root, { recursive: true, force: true })
    throw err
  }
}

async function recordIn (root, workload) {
  const [back, mnt, logDir, snapshot] = ['back', 'mnt', 'log', 'snapshot'].map((d) => path.join(root, d))
  for (const d of [back, mnt, logDir]) fs.mkdirSync(d)
  const spec = (top, steps, name) => ({
    engine: workload.engine, dir: path.join(top, workload.store), options: workload.options, steps, seed: name, mark: path.join(top, '.mark'), outcomes: path.join(logDir, `${name}.json`)
  })
  let before = []
  if (workload.prepare) {
    const run = await node('workload.js', spec(back, workload.prepare, 'before'), scaled(120000))
    if (run.code !== 0) throw new Error(`preparing ${workload.name} failed: ${run.err}`)
    before = JSON.parse(fs.readFileSync(path.join(logDir, 'before.json'), 'utf8'))
    fs.rmSync(path.join(back, '.mark'))
    // What an older kfs would have left: the recorded run upgrades it.
    if (workload.older === 2) await toFormat2(path.join(back, workload.store))
  }
  execFileSync('sync', ['-f', back]) // what was prepared is durable when recording starts
  execFileSync('cp', ['-a', back, snapshot])
  const unmount = await mount(back, mnt, logDir)
  let run
  try {
    run = await node('workload.js', spec(mnt, workload.steps, 'run'), scaled(300000))
  } finally {
    await unmount()
  }
  if (run.code !== 0) throw new Error(`workload ${workload.name} failed: ${run.err}`)
  const outcomes = JSON.parse(fs.readFileSync(path.join(logDir, 'run.json'), 'utf8'))
  return { log: readLog(logDir), outcomes, before, snapshot, root }
}

// Builds every distinct crash state of a recorded workload and checks each in a fresh
// process, `parallel` at a time; `perModel`: { model: at most that many states },
// spread evenly over the run. Resolves to [{ model, cut, broken: [...], problems }].
async function check (workload, recorded, { parallel = 2, perModel = {} } = {}) {
  const { log, outcomes, before, snapshot, root } = recorded
  const seen = new Set()
  const states = []
  for (const state of crashStates(log)) {
    // The same disk is a new state where more promises were made before the cut.
    state.expected = expectations(log, outcomes, state.cut, before)
    const id = JSON.stringify([state.model, state.key, state.expected.opened, [...state.expected.keys]])
    if (seen.has(id)) continue
    seen.add(id)
    states.push(state)
  }
  const chosen = MODELS.flatMap((model) => spread(states.filter((s) => s.model === model), perModel[model] ?? Infinity))
  const results = []
  let next = 0
  const worker = async () => {
    while (next < chosen.length) {
      const state = chosen[next++]
      const out = path.join(root, `state-${next}`)
      materialize(log, snapshot, state.entries, out)
      const expected = state.expected
      const run = await node('check.js', { engine: workload.engine, dir: path.join(out, workload.store), options: workload.options, keys: [...expected.keys.keys()] }, scaled(60000))
      let found
      try {
        found = JSON.parse(run.out)
      } catch {
        found = { opened: false, error: `the check ended with ${run.signal || run.code}: ${run.err.trim().split('\n').slice(-3).join(' ')}` }
      }
      fs.rmSync(out, { recursive: true, force: true })
      results.push({ model: state.model, cut: state.cut, broken: judge(expected, found), problems: found.problems || [], repaired: afterRepair(expected, found.repaired) })
    }
  }
  await Promise.all(Array.from({ length: parallel }, worker))
  return results
}

// `count` of `list`, evenly apart, the first and the last among them.
function spread (list, count) {
  if (list.length <= count) return list
  if (count <= 1) return list.slice(-count)
  return Array.from({ length: count }, (_, i) => list[Math.round(i * (list.length - 1) / (count - 1))])
}

// What a state gave back after repairing the shards verify() named: { broken (as
// judge), lost (what repair dropped or could not account for) }, or undefined.
function afterRepair (expected, repaired) {
  if (!repaired) return undefined
  const lost = repaired.dropped.map((d) => `${d.key}: ${d.problem}`)
  if (repaired.unaccounted) lost.push(`${repaired.unaccounted} files unaccounted`)
  const problems = repaired.problems.map((p) => `still ${p.kind} ${p.shard}: ${p.problem}`)
  return { broken: [...judge(expected, { opened: true, reads: repaired.reads }), ...problems], lost }
}

// By model: { states, broken, problems (states where verify named damage), examples
// (of broken states), damage (what verify said, by state), recovered (states with
// damage that verify named and after whose repair every promise held), dropped (of
// those, states where repair dropped files or could not account for some),
// unrecovered (examples of states with damage not so recovered), unnamed (broken
// states whose reads failed otherwise than with EINTEGRITY naming the damage) }.
function summarize (results) {
  const by = Object.fromEntries(MODELS.map((model) => [model, { states: 0, broken: 0, problems: 0, examples: [], damage: [], recovered: 0, dropped: 0, unrecovered: [], unnamed: 0 }]))
  for (const r of results) {
    const s = by[r.model]
    s.states++
    if (r.problems.length) {
      s.problems++
      s.damage.push(`cut ${r.cut}: ${r.problems.map((p) => `${p.kind} ${p.shard}: ${p.problem}`).join('; ')}`)
    }
    if (r.broken.length) {
      s.broken++
      if (s.examples.length < 3) s.examples.push(`cut ${r.cut}: ${r.broken.join('; ')}`)
      if (!r.problems.length || r.broken.some((b) => !/: read EINTEGRITY,/.test(b))) s.unnamed++
    }
    if (!r.broken.length && !r.problems.length) continue
    const after = r.repaired || { broken: ['verify() named no damage'], lost: [] }
    if (after.broken.length) {
      if (s.unrecovered.length < 3) s.unrecovered.push(`cut ${r.cut}: after repair ${after.broken.join('; ')}`)
      continue
    }
    s.recovered++
    if (after.lost.length) s.dropped++
  }
  return by
}

module.exports = { unavailable, record, check, summarize }

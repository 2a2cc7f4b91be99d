'use strict'

// kfs's own work per small file (perf/probes/costs.js's figure 4): 1 KiB files written one at a
// time with writeFile (awaited) into a store whose 256 shards exist, with LevelDB's
// batch call replaced, once the shards exist, by a promise already resolved. What is
// left is what kfs does around LevelDB on the JS thread: what raw leveldown's loop in
// perf/probes/write-path.js does not do.
//
// Each engine (kfs: this checkout; base: the kfs at DIR) runs in a child process of its
// own, kept for all steps of `files` files, which are interleaved, the first engine
// alternating (perf/harness/child.js, runSteps): on a shared machine, the steps compared are
// next to each other in time.
// Each step gives wall time and the process's CPU time (user + system) per file (with
// the batch stubbed, the process runs on one thread); the report gives their medians,
// and the median and quartiles of the per-step ratio kfs / base. --profile: then a
// step of 20,000 files of kfs, in a process and store of its own, is profiled (V8's
// sampling profiler, 50 µs) into FILE (.cpuprofile), and the functions taking most of
// it are printed, in µs per file.

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const crypto = require('node:crypto')
const { runSteps, now, msSince } = require('../harness/child')
const { cli, runScript } = require('../harness/script')
const { randomKey: key, openStore } = require('../harness/kfs-work')

const COMMAND = cli(__filename, {
  options: [
    { name: '--files', type: 'count', default: 1000, help: 'files per step' },
    { name: '--steps', type: 'count', default: 60, help: 'steps' },
    { name: '--base', type: 'path', arg: 'DIR', help: 'the kfs at DIR, measured side by side' },
    { name: '--dir', type: 'path', default: process.env.KFS_PERF_DIR || os.tmpdir(), shown: '$KFS_PERF_DIR, else the temp dir', help: 'where the data goes' },
    { name: '--profile', type: 'path', arg: 'FILE', help: 'then profile a step of 20,000 files into FILE (.cpuprofile)' }
  ]
})
const PROFILED = 20000 // files in the profiled step

// In the child (perf/harness/child.js, Stepped): a store of `lib` whose 256 shards exist; each
// step writes `files` files, profiled into `profile` if given.
async function engine ({ lib, dir, files, profile }) {
  const store = await openStore(dir, 256, lib)
  const { LevelDb } = require(path.join(lib, 'lib', 'leveldb', 'leveldb'))
  const batch = LevelDb.prototype.batch
  LevelDb.prototype.batch = () => Promise.resolve()
  const value = crypto.randomBytes(1024)
  for (let i = 0; i < 2000; i++) await store.writeFile(key(), value) // warm
  const step = async () => {
    const keys = Array.from({ length: files }, key)
    const session = profile && (await startProfile())
    const cpu = process.cpuUsage()
    const start = now()
    for (const k of keys) await store.writeFile(k, value)
    const us = (msSince(start) * 1000) / files
    const used = process.cpuUsage(cpu)
    if (session) fs.writeFileSync(profile, JSON.stringify(await session.stop()))
    return { us, cpu: (used.user + used.system) / files }
  }
  const close = async () => {
    LevelDb.prototype.batch = batch
    await store.close()
  }
  return { step, close }
}

async function startProfile () {
  const inspector = require('node:inspector')
  const session = new inspector.Session()
  session.connect()
  const post = (method, params) => new Promise((resolve, reject) => session.post(method, params, (err, r) => (err ? reject(err) : resolve(r))))
  await post('Profiler.enable')
  await post('Profiler.setSamplingInterval', { interval: 50 })
  await post('Profiler.start')
  return { stop: async () => (await post('Profiler.stop')).profile }
}

// The functions with the most time of their own, and of what they call, in µs per file.
function topFunctions (profile, files, count = 25) {
  const parent = new Map()
  for (const n of profile.nodes) for (const c of n.children || []) parent.set(c, n)
  const byId = new Map(profile.nodes.map((n) => [n.id, n]))
  const name = (n) => `${n.callFrame.functionName || '(anonymous)'} ${n.callFrame.url.replace(/^.*\/(lib|node_modules)\//, '$1/')}:${n.callFrame.lineNumber + 1}`
  const self = new Map()
  const total = new Map()
  profile.samples.forEach((id, i) => {
    const dt = profile.timeDeltas[i + 1] || 0
    const node = byId.get(id)
    self.set(name(node), (self.get(name(node)) || 0) + dt)
    const seen = new Set()
    for (let n = node; n; n = parent.get(n.id)) {
      if (!seen.has(name(n))) total.set(name(n), (total.get(name(n)) || 0) + dt)
      seen.add(name(n))
    }
  })
  const lines = (m) => [...m].sort((a, b) => b[1] - a[1]).slice(0, count).map(([n, t]) => `${(t / files).toFixed(2).padStart(7)}  ${n}`)
  return `self, µs per file:\n${lines(self).join('\n')}\n\nwith what they call, µs per file:\n${lines(total).join('\n')}`
}

async function main (args) {
  const root = fs.mkdtempSync(path.join(args.dir, 'kfs-small-own-'))
  const engines = [['kfs', path.join(__dirname, '..', '..')], ...(args.base ? [['base', args.base]] : [])]
  const job = (name, lib, extra) => ({ name: 'engine', engine: name, lib, dir: path.join(root, name), files: args.files, ...extra })
  let results
  try {
    results = await runSteps(__filename, engines.map(([name, lib]) => job(name, lib)), args.steps)
    // In a process of its own, as a store of its own: one step of PROFILED files.
    if (args.profile) await runSteps(__filename, [job('profiled', engines[0][1], { files: PROFILED, profile: args.profile })], 1)
  } finally {
    fs.rmSync(root, { recursive: true, force: true })
  }
  const quartiles = (xs) => {
    const sorted = [...xs].sort((x, y) => x - y)
    return [0.25, 0.5, 0.75].map((q) => sorted[Math.round(q * (sorted.length - 1))])
  }
  const f = (xs, d = 1) => { const [q1, m, q3] = quartiles(xs); return `${m.toFixed(d)} (quartiles ${q1.toFixed(d)}-${q3.toFixed(d)})` }
  console.log(`# perf/probes/small-own.js: ${args.steps} steps of ${args.files} files of 1 KiB, LevelDB's batch call stubbed; µs per file, medians of steps`)
  for (const [name] of engines) console.log(`${name}: wall ${f(results[name].map((x) => x.us))}; CPU ${f(results[name].map((x) => x.cpu))}`)
  if (args.base) {
    const ratios = (what) => results.kfs.map((x, i) => x[what] / results.base[i][what])
    console.log(`kfs / base, per step: wall ${f(ratios('us'), 3)}; CPU ${f(ratios('cpu'), 3)}`)
  }
  if (args.profile) console.log(`\n${topFunctions(JSON.parse(fs.readFileSync(args.profile, 'utf8')), PROFILED)}`)
}

runScript(COMMAND, { cases: { engine }, main, tee: true })

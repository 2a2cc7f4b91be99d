'use strict'

// How the piece benchmarks (perf/pieces.js, churn.js, grow.js) run and describe a run:
// rounds of engines, each in a child process of its own, and the machine a report names.

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { inChild } = require('./child')
const { commitOf, filesystemOf, fmt, MiB } = require('./script')

// This machine; `short`, as the chart names it.
function machine (short = false) {
  const cpus = os.cpus()
  const cores = `${cpus.length} × ${cpus[0] ? cpus[0].model.trim() : 'unknown cpu'}, ${fmt(os.totalmem() / 2 ** 30, 1)} GiB`
  return short ? `${cores}, node ${process.version}` : `${cores}, Linux ${os.release()}, node ${process.version}, leveldown ${require('leveldown/package.json').version}`
}

// Runs `engines` in turn, each in a child process of `script` (inChild), `rounds`
// times, the order rotated round by round, each into a new directory in a new one
// under `dir`, removed at the end; refuses to start with less than `need` bytes free.
// job(engine, dir) is the child's job; beside(engine, dir), if given, may start work
// beside it and return its stop(), awaited once the child exited. Resolves to
// { rows: each child's rows (or row) with its round and engine,
//   context: { loadStart, loadEnd, filesystem, commit } }.
async function runRounds ({ script, name, engines, rounds, dir, need, job, beside = () => undefined }) {
  fs.mkdirSync(dir, { recursive: true })
  const base = fs.mkdtempSync(path.join(dir, `kfs-${name}-`))
  const context = { loadStart: os.loadavg(), filesystem: filesystemOf(base), commit: commitOf() }
  const rows = []
  try {
    const { bavail, bsize } = fs.statfsSync(base)
    if (bavail * bsize < need) throw new Error(`${base} has ${fmt(bavail * bsize / MiB)} MiB free; this run needs about ${fmt(need / MiB)} MiB`)
    for (let round = 1; round <= rounds; round++) {
      for (let i = 0; i < engines.length; i++) {
        const engine = engines[(i + round - 1) % engines.length]
        const engineDir = path.join(base, `${engine}-${round}`)
        process.stderr.write(`perf/${name}.js: round ${round}, ${engine}\n`)
        const stop = beside(engine, engineDir)
        let result
        try {
          result = await inChild(script, job(engine, engineDir))
        } finally {
          if (stop) await stop()
        }
        for (const r of [result].flat()) rows.push({ round, engine, ...r })
        fs.rmSync(engineDir, { recursive: true, force: true })
      }
    }
  } finally {
    fs.rmSync(base, { recursive: true, force: true })
  }
  context.loadEnd = os.loadavg()
  return { rows, context }
}

module.exports = { machine, runRounds }

'use strict'

// Records every crash-state workload (workloads.js) and checks all of its states, or
// at most --per-model N of each model, and prints states tried and broken by workload
// and model. The test (test/system/crash-states.test.js) checks fewer, for time.
// usage: node test/crash/run.js [--per-model N] [--workload NAME]
const fs = require('node:fs')
const { parseArgs } = require('node:util')
const { unavailable, record, check, summarize } = require('./harness')
const { workloads } = require('./workloads')
const { MODELS } = require('./states')

async function main () {
  const { values } = parseArgs({ options: { 'per-model': { type: 'string' }, workload: { type: 'string' } } })
  const reason = unavailable()
  if (reason) throw new Error(`crash states cannot be recorded here: ${reason}`)
  const limit = values['per-model'] ? Number(values['per-model']) : Infinity
  const perModel = Object.fromEntries(MODELS.map((m) => [m, limit]))
  const rows = []
  for (const workload of workloads.filter((w) => !values.workload || w.name === values.workload)) {
    const recorded = await record(workload)
    try {
      const by = summarize(await check(workload, recorded, { perModel }))
      rows.push([workload.name, recorded.log.ops.length, ...MODELS.map((m) => `${by[m].broken} of ${by[m].states}`), MODELS.reduce((n, m) => n + by[m].problems, 0)])
      for (const m of MODELS) for (const e of by[m].examples) console.error(`${workload.name}, ${m}, ${e}`)
    } finally {
      fs.rmSync(recorded.root, { recursive: true, force: true })
    }
  }
  console.log(`| workload | calls recorded | ${MODELS.map((m) => `${m}: broken of states`).join(' | ')} | states where verify named damage |`)
  console.log(`|---|---:|${MODELS.map(() => '---:').join('|')}|---:|`)
  for (const row of rows) console.log(`| ${row.join(' | ')} |`)
}

main().catch((err) => {
  console.error(err.message)
  process.exitCode = 1
})

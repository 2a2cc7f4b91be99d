'use strict'

// Records every crash-state workload (workloads.js) and checks all of its states, or
// at most --per-model N of each model, or only those of --model NAME, and prints states
// tried and broken by workload and model, and the states whose damage verify() named,
// whether every promise held after repair() and whether it dropped files. The test (test/system/crash-states.test.js) checks fewer.
// usage: node test/crash/run.js [--per-model N] [--workload NAME] [--model NAME]
const fs = require('node:fs')
const { parseArgs } = require('node:util')
const { unavailable, record, check, summarize } = require('./harness')
const { workloads } = require('./workloads')
const { MODELS: ALL } = require('./states')

async function main () {
  const { values } = parseArgs({ options: { 'per-model': { type: 'string' }, workload: { type: 'string' }, model: { type: 'string' } } })
  const reason = unavailable()
  if (reason) throw new Error(`crash states cannot be recorded here: ${reason}`)
  const limit = values['per-model'] ? Number(values['per-model']) : Infinity
  const MODELS = ALL.filter((m) => !values.model || m === values.model)
  const perModel = Object.fromEntries(ALL.map((m) => [m, MODELS.includes(m) ? limit : 0]))
  const rows = []
  for (const workload of workloads.filter((w) => !values.workload || w.name === values.workload)) {
    const recorded = await record(workload)
    try {
      const by = summarize(await check(workload, recorded, { perModel }))
      const count = (key) => MODELS.reduce((n, m) => n + by[m][key], 0)
      rows.push([workload.name, recorded.log.ops.length, ...MODELS.map((m) => `${by[m].broken} of ${by[m].states}`), count('problems'), count('recovered'), count('dropped')])
      for (const m of MODELS) {
        for (const e of by[m].examples) console.error(`${workload.name}, ${m}, broken: ${e}`)
        for (const e of by[m].damage) console.error(`${workload.name}, ${m}, verify: ${e}`)
        for (const e of by[m].unrecovered) console.error(`${workload.name}, ${m}, not recovered: ${e}`)
      }
    } finally {
      fs.rmSync(recorded.root, { recursive: true, force: true })
    }
  }
  console.log(`| workload | calls recorded | ${MODELS.map((m) => `${m}: broken of states`).join(' | ')} | states where verify named damage | of them whole after repair | of those, repair dropped files |`)
  console.log(`|---|---:|${MODELS.map(() => '---:').join('|')}|---:|---:|---:|`)
  for (const row of rows) console.log(`| ${row.join(' | ')} |`)
}

main().catch((err) => {
  console.error(err.message)
  process.exitCode = 1
})

'use strict'

// The crash-state workloads (test/crash/workloads.js) as tests, in parts that run as
// files of their own (crash-states.test.js, crash-states-2.test.js), so that mocha's
// workers run them side by side: together they take longer than any other file.
const fs = require('node:fs')
const { expect } = require('chai')
const { unavailable, record, check, summarize } = require('../crash/harness')
const { workloads } = require('../crash/workloads')
const { MODELS } = require('../crash/states')
const { scaled } = require('../helpers')

// States checked per workload: every posix state (the fewest, and the most revealing),
// and a spread of the prefix, journal and subset ones; at least 250 of kfs in each part.
const PER_MODEL = Number(process.env.KFS_CRASH_STATES_PER_MODEL) || 35
const LIMITS = { prefix: PER_MODEL, journal: PER_MODEL, subset: PER_MODEL }
// The workloads of each part, by name, about equal in time.
const PARTS = [
  ['new store', 'synced writes', 'writes at once', 'raw LevelDB', 'trash'],
  ['new shards', 'unsynced writes', 'reclaiming', 'pieces, upgraded from format 2', 'expiry collection']
]

function powerCutSuite (part) {
  describe(`crash states: a power cut at any point of a run (part ${part + 1} of ${PARTS.length})`, function () {
    this.timeout(scaled(600000))
    const tried = Object.fromEntries(MODELS.map((m) => [m, 0]))

    before(function () {
      const reason = unavailable()
      if (reason) {
        console.log(`      skipped: ${reason}`)
        this.skip()
      }
    })

    for (const workload of workloads.filter((w) => PARTS[part].includes(w.name))) {
      // sync: false promises less: a power cut may undo the latest writes, and a file
      // whose chunks went to an older log than its commit may come back with chunks
      // missing, which reads and verify() then name and repair drops.
      const unsynced = !workload.control && !workload.options.sync
      const promise = workload.control
        ? 'loses synced writes under the posix model (the harness sees a loss)'
        : unsynced
          ? 'every state opens, every file is a version it had, absent, or damage that reads (EINTEGRITY) and verify name and after whose repair every file is a version it had or absent'
          : 'every state opens and verifies clean, every synced write resolved reads back whole, every other file is a version it had or absent'
      it(`${workload.name}: ${promise} (${MODELS.join(', ')} models)`, async function () {
        const recorded = await record(workload)
        try {
          const by = summarize(await check(workload, recorded, { perModel: LIMITS }))
          console.log(`      ${workload.name}: ${MODELS.map((m) => `${m} ${by[m].broken} broken of ${by[m].states}${by[m].problems ? ` (${by[m].problems} named, ${by[m].recovered} whole after repair)` : ''}`).join(', ')}`)
          if (workload.control) {
            expect(by.posix.broken, 'raw LevelDB under the posix model').to.be.above(0)
            return
          }
          for (const m of MODELS) tried[m] += by[m].states
          for (const m of MODELS) expect(by[m].states, `${m} model`).to.be.above(0)
          if (unsynced) {
            for (const m of MODELS) expect(by[m].unnamed, `${m} model: broken states not all EINTEGRITY named by verify(): ${by[m].examples.join(' | ')}`).to.equal(0)
            for (const m of MODELS) expect(by[m].unrecovered, `${m} model: after repair`).to.deep.equal([])
            return
          }
          for (const m of MODELS) expect(by[m].examples, `${m} model`).to.deep.equal([])
          for (const m of MODELS) expect(by[m].problems, `${m} model: states where verify() named damage`).to.equal(0)
        } finally {
          fs.rmSync(recorded.root, { recursive: true, force: true })
        }
      })
    }

    it('kfs was checked in at least 250 states', function () {
      const total = MODELS.reduce((n, m) => n + tried[m], 0)
      if (process.env.KFS_CRASH_STATES_PER_MODEL) this.skip()
      expect(total).to.be.at.least(250)
    })

    it('every workload is in one part', () => {
      expect(PARTS.flat().sort()).to.deep.equal(workloads.map((w) => w.name).sort())
    })
  })
}

module.exports = { powerCutSuite }

'use strict'

const { expect } = require('chai')
const fs = require('node:fs')
const path = require('node:path')
const { sources, requiresOf } = require('./requires')

// perf/ as doc/performance/README.md lays it out: the benchmarks a user runs (those
// behind `npm run benchmark*`) at its top, the modules they share in harness/, one-off
// measurements in probes/. The harness is below the scripts: it requires none of them,
// a probe is run, never required, and no module requires itself through others.
const ROOT = path.join(__dirname, '..')
const PERF = path.join(ROOT, 'perf')
const HARNESS = path.join(PERF, 'harness')
const PROBES = path.join(PERF, 'probes')
const name = (file) => path.relative(ROOT, file)
const inside = (dir, file) => !path.relative(dir, file).startsWith('..')

// Each perf/ file's requires of files in the package: { file: [target] }.
function requireGraph () {
  const graph = new Map()
  for (const file of sources(PERF)) graph.set(file, requiresOf(file).local.map((r) => r.target).filter(Boolean))
  return graph
}

// The cycles of `graph`, each as the names of its files, the first repeated at the end.
function cycles (graph) {
  const found = []
  const state = new Map() // file -> 'open' while on the path, 'done' after
  const visit = (file, trail) => {
    if (state.get(file) === 'done') return
    if (state.get(file) === 'open') return found.push([...trail.slice(trail.indexOf(file)), file].map(name))
    state.set(file, 'open')
    for (const next of graph.get(file) || []) visit(next, [...trail, file])
    state.set(file, 'done')
  }
  for (const file of graph.keys()) visit(file, [])
  return found
}

describe('the layout of perf/', () => {
  const pkg = require('../package.json')
  const benchmarks = Object.entries(pkg.scripts).filter(([script]) => /^benchmark(:|$)/.test(script))
    .map(([, command]) => /^node (perf\/[\w-]+\.js)$/.exec(command)?.[1] ?? command)

  it('holds at its top the scripts behind `npm run benchmark*`, at most 10, and the rest in harness/ and probes/', () => {
    const entries = fs.readdirSync(PERF, { withFileTypes: true })
    const top = entries.filter((e) => e.isFile()).map((e) => `perf/${e.name}`)
    expect(top.sort()).to.deep.equal([...benchmarks].sort())
    expect(top.length).to.be.at.most(10)
    expect(entries.filter((e) => e.isDirectory()).map((e) => e.name).sort()).to.deep.equal(['harness', 'probes'])
  })

  it('requires only files that exist; the harness requires no script, nothing requires a probe', () => {
    const wrong = []
    for (const file of sources(PERF)) {
      for (const { spec, target } of requiresOf(file).local) {
        if (target === undefined) wrong.push(`${name(file)} requires ${spec}, which does not exist`)
        else if (inside(HARNESS, file) && inside(PERF, target) && !inside(HARNESS, target)) wrong.push(`${name(file)} requires ${spec}: the harness requires no script`)
        else if (inside(PROBES, target)) wrong.push(`${name(file)} requires ${spec}: a probe is run, not required`)
      }
    }
    expect(wrong).to.deep.equal([])
  })

  it('has no circle of requires', () => {
    expect(cycles(requireGraph())).to.deep.equal([])
  })

  it('finds a circle where there is one', () => {
    const [a, b, c] = ['a.js', 'b.js', 'c.js'].map((f) => path.join(ROOT, f))
    expect(cycles(new Map([[a, [b]], [b, [c]], [c, [b]]]))).to.deep.equal([['b.js', 'c.js', 'b.js']])
  })
})

'use strict'

const { expect } = require('chai')
const path = require('node:path')
const { sources, requiresOf } = require('./requires')

// lib/ is in layers (doc/about.md, "Map of the code"): a module may require modules of
// its own layer and of the layers below it, never of one above. From the top:
const LAYERS = ['store.js', 'store', 'share', 'maintenance', 'data', 'shard', 'dir', 'leveldb', 'api', 'base']
const ROOT = path.join(__dirname, '..')
const LIB = path.join(ROOT, 'lib')
// The CLI is a client of the package like any other: it sees kfs through the package's
// entry only (and reads the package's version).
const CLI_MAY_LEAVE = new Set([path.join(ROOT, 'index.js'), path.join(ROOT, 'package.json')])

// The layer a file of lib/ is in: its folder, or store.js itself.
const layerOf = (file) => path.relative(LIB, file).split(path.sep)[0]

// What is wrong with one file's requires, one line each.
function violations (file) {
  const from = layerOf(file)
  const name = path.relative(ROOT, file)
  const { local, unchecked } = requiresOf(file)
  const found = unchecked ? [`${name}: ${unchecked} require() of something other than a string literal`] : []
  for (const { spec, target } of local) {
    if (target === undefined) {
      found.push(`${name} requires ${spec}, which does not exist`)
      continue
    }
    const inLib = !path.relative(LIB, target).startsWith('..')
    if (from === 'cli') {
      if (!CLI_MAY_LEAVE.has(target) && !(inLib && layerOf(target) === 'cli')) found.push(`${name} requires ${spec}: the CLI may use only the package's entry ('../..') and lib/cli/`)
      continue
    }
    if (!LAYERS.includes(from)) {
      found.push(`${name}: lib/${from} is in no layer`)
      break
    }
    if (!inLib) found.push(`${name} requires ${spec}, outside lib/`)
    else if (!LAYERS.includes(layerOf(target))) found.push(`${name} requires ${spec}, in no layer`)
    else if (LAYERS.indexOf(layerOf(target)) < LAYERS.indexOf(from)) found.push(`${name} requires ${spec}: ${layerOf(target)} is above ${from}`)
  }
  return found
}

describe('layers of lib/', () => {
  it('has no require() of a layer above the requiring one, and the CLI uses only the package entry', () => {
    expect(sources(LIB).flatMap(violations)).to.deep.equal([])
  })

  it('sees the requires it checks', () => {
    // A check that found no requires at all would pass whatever the code does.
    const { local } = requiresOf(path.join(LIB, 'store', 'local.js'))
    expect(local.map((r) => r.spec)).to.include('../data/files')
  })
})

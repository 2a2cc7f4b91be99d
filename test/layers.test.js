'use strict'

const { expect } = require('chai')
const fs = require('node:fs')
const path = require('node:path')

// lib/ is in layers (doc/about.md, "Map of the code"): a module may require modules of
// its own layer and of the layers below it, never of one above. From the top:
const LAYERS = ['store.js', 'store', 'share', 'maintenance', 'data', 'shard', 'dir', 'leveldb', 'api', 'base']
const ROOT = path.join(__dirname, '..')
const LIB = path.join(ROOT, 'lib')
// The CLI is a client of the package like any other: it sees kfs through the package's
// entry only (and reads the package's version).
const CLI_MAY_LEAVE = new Set([path.join(ROOT, 'index.js'), path.join(ROOT, 'package.json')])

function sources (dir) {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const file = path.join(dir, entry.name)
    if (entry.isDirectory()) return sources(file)
    return entry.name.endsWith('.js') ? [file] : []
  })
}

// The layer a file of lib/ is in: its folder, or store.js itself.
const layerOf = (file) => path.relative(LIB, file).split(path.sep)[0]

// Every require() of a file, by where it leads; a module outside the package (node:*,
// a dependency) leads nowhere in it. A require of anything but a string literal cannot
// be checked, so it is reported as such.
function requiresOf (file) {
  const text = fs.readFileSync(file, 'utf8')
  const calls = text.match(/\brequire\s*\(/g) || []
  const found = [...text.matchAll(/\brequire\s*\(\s*(['"])([^'"]+)\1\s*\)/g)].map((m) => m[2])
  const unchecked = calls.length - found.length
  const local = found.filter((spec) => spec.startsWith('.'))
    .map((spec) => ({ spec, target: resolved(path.resolve(path.dirname(file), spec)) }))
  return { local, unchecked }
}

// The file a require of `where` loads, or undefined if there is none.
function resolved (where) {
  try {
    return require.resolve(where)
  } catch (err) {
    if (err.code !== 'MODULE_NOT_FOUND') throw err
  }
}

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

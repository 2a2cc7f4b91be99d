'use strict'

// The require()s of the package's own files, as the tests of its layout read them
// (test/layers.test.js for lib/, test/perf-layout.test.js for perf/).
const fs = require('node:fs')
const path = require('node:path')

// Every .js file under `dir`, in its sub-folders too.
function sources (dir) {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const file = path.join(dir, entry.name)
    if (entry.isDirectory()) return sources(file)
    return entry.name.endsWith('.js') ? [file] : []
  })
}

// Every require() of a file, by where it leads; a module outside the package (node:*,
// a dependency) leads nowhere in it. A require of anything but a string literal cannot
// be checked, so it is counted as such.
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

module.exports = { sources, requiresOf }

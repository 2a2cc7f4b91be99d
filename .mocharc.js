'use strict'

const fs = require('node:fs')
const path = require('node:path')

// The test files run three at a time, each in a process of its own (most of a file's
// time is spent waiting on child processes, disks and timers, not on a core); spec
// prints each test as its file completes, and the count at the end.
//
// Workers take the files in this order, so the longest start first and the short ones
// fill in around them, rather than a long one starting last and running alone.
const LONGEST = ['crash-states', 'perf-node', 'disk-full', 'perf', 'reclaim', 'open-shards', 'read-only', 'store', 'cli', 'crash', 'perf-costs', 'lifecycle', 'cli-faults']
const files = fs.readdirSync(path.join(__dirname, 'test')).filter((name) => name.endsWith('.test.js')).sort()
const rank = (name) => {
  const i = LONGEST.indexOf(name.replace(/\.test\.js$/, ''))
  return i === -1 ? LONGEST.length : i
}

module.exports = {
  spec: files.sort((a, b) => rank(a) - rank(b)).map((name) => `test/${name}`),
  timeout: 30000,
  reporter: 'spec',
  parallel: true,
  jobs: 3
}

'use strict'

// The file lists of `npm test` (test/mocharc.default.js: every test/*.test.js) and
// `npm run test:system` (test/mocharc.system.js: test/system/*.test.js, the tests that
// need root, loop and bind mounts, strace or FUSE, run perf/ scripts or kill writers
// in long loops), and the options both run with. `npm run test:all` runs both.
const fs = require('node:fs')
const path = require('node:path')
const { scaled } = require('./helpers')

// Longest first, by the time each took in a run of the whole suite, so the longest
// start first and the short ones fill in around them, rather than a long one starting
// last and running alone. A file not named here comes after these, in name order.
const LONGEST = [
  'system/crash-states', 'system/crash-states-2', 'system/disk-full', 'system/perf', 'system/perf-node', 'system/crash',
  'system/read-only-mounts', 'system/perf-pieces',
  'reclaim', 'cli', 'cli-commands', 'lifecycle', 'share', 'share-handover', 'cli-errors', 'open-shards', 'read-only', 'cli-faults',
  'system/perf-churn', 'system/perf-costs', 'concurrency', 'store'
]

function files (...dirs) {
  const found = dirs.flatMap((dir) => fs.readdirSync(path.join(__dirname, dir))
    .filter((name) => name.endsWith('.test.js'))
    .map((name) => path.posix.join(dir, name.replace(/\.test\.js$/, ''))))
    .sort()
  const rank = (name) => {
    const i = LONGEST.indexOf(name)
    return i === -1 ? LONGEST.length : i
  }
  return found.sort((a, b) => rank(a) - rank(b)).map((name) => `test/${name}.test.js`)
}

// Each file in a process of its own, four at a time: much of a file's time is spent
// waiting on child processes, disks and timers (the library's 5 s wait for a holder
// that does not share, in lifecycle, read-only, cli and share), not on a core, and
// four keep two cores busy where three left them idle at times. One file at a time
// (serial, where spec prints each test as it ends) took about 4 minutes for npm test,
// twice as long. In parallel, spec prints a file's tests when the file completes.
function config (...dirs) {
  return {
    spec: files(...dirs),
    timeout: scaled(60000), // a hang, not a slow machine; KFS_TEST_SLOWDOWN scales it (test/helpers.js)
    reporter: 'spec',
    parallel: true,
    jobs: 4
  }
}

module.exports = { files, config }

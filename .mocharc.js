'use strict'

// The test files run three at a time, each in a process of its own (most of a file's
// time is spent waiting on child processes, disks and timers, not on a core); spec
// prints each test as its file completes, and the count at the end.
module.exports = {
  spec: ['test/**/*.test.js'],
  timeout: 30000,
  reporter: 'spec',
  parallel: true,
  jobs: 3
}

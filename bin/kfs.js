#!/usr/bin/env node
'use strict'

// Opening a shard is a few synced writes in LevelDB, run on libuv's threads: commands
// that open every shard (list, verify) open them 16 at a time instead of 4 (256 shards
// measured: 234 ms instead of 544). Read when the pool starts, so set before any I/O.
process.env.UV_THREADPOOL_SIZE = process.env.UV_THREADPOOL_SIZE || '16'

const fs = require('node:fs')
const { main } = require('../lib/cli/program')
const { clearProgress } = require('../lib/cli/progress')
const { rawArguments } = require('../lib/cli/argv')
const { removeShadowsSync } = require('..')

// Errors writing standard output are reported by the command that wrote (one `kfs:`
// line, exit 1); a reader closing the pipe early (`kfs get KEY | head`) is not an error.
process.stdout.on('error', () => {})

// Ctrl-C or a kill: a progress bar on screen is cleared, files being written beside
// their target are removed, and the shadows of a store opened read-only
// (lib/leveldb/read-only.js), then the signal is raised again, its handler gone, so
// that its default action ends the process at once, with the status a shell shows as
// 128 + its number (130, 143, 129).
// process.exit() could hang: libuv joins its threads at exit, and one may be blocked
// for good (opening a FIFO that nobody opens for writing). The store needs no closing:
// an interrupted operation is like a crash, which it survives.
const temps = new Set()
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
  process.once(signal, () => {
    clearProgress()
    for (const file of temps) fs.rmSync(file, { force: true })
    removeShadowsSync()
    process.kill(process.pid, signal)
  })
}

const rawArgs = rawArguments(process.argv.length - 2)
main(process.argv, { stdin: process.stdin, stdout: process.stdout, stderr: process.stderr, temps, rawArgs }).then((code) => {
  process.exitCode = code
})

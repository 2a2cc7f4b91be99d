#!/usr/bin/env node
'use strict'

// Opening a shard is a few synced writes on libuv's threads: list and verify open 16 at
// a time instead of 4 (256 shards: 234 ms instead of 544). Read when the pool starts.
process.env.UV_THREADPOOL_SIZE = process.env.UV_THREADPOOL_SIZE || '16'

const fs = require('node:fs')
const { main } = require('../lib/cli/program')
const { clearProgress } = require('../lib/cli/progress')
const screen = require('../lib/cli/screen')
const { rawArguments } = require('../lib/cli/argv')
const { removeShadowsSync } = require('..')

// Errors writing standard output are reported by the command that wrote (one `kfs:`
// line, exit 1); a reader closing the pipe early (`kfs get KEY | head`) is not an error.
process.stdout.on('error', () => {})

// Ctrl-C or a kill: the progress bar is cleared, the terminal kfs top took given back,
// files written beside their target and the shadows of a store opened read-only
// removed, then the signal is raised again, its handler gone, so that the process ends
// at once with status 128 + its number.
// process.exit() could hang: libuv joins its threads at exit, and one may be blocked for
// good (opening a FIFO nobody writes). The store needs no closing: it survives a crash.
const temps = new Set()
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
  process.once(signal, () => {
    clearProgress()
    screen.leave()
    for (const file of temps) fs.rmSync(file, { force: true })
    removeShadowsSync()
    process.kill(process.pid, signal)
  })
}

const rawArgs = rawArguments(process.argv.length - 2)
main(process.argv, { stdin: process.stdin, stdout: process.stdout, stderr: process.stderr, temps, rawArgs }).then((code) => {
  process.exitCode = code
})

#!/usr/bin/env node
'use strict'

const fs = require('node:fs')
const { main } = require('../lib/cli/program')

// Errors writing standard output are reported by the command that wrote (one `kfs:`
// line, exit 1); a reader closing the pipe early (`kfs get KEY | head`) is not an error.
process.stdout.on('error', () => {})

// Ctrl-C or a kill: files being written beside their target are removed, and the exit
// code says which signal it was. The store needs no closing: an interrupted operation
// is like a crash, which it survives.
const temps = new Set()
for (const [signal, code] of [['SIGINT', 130], ['SIGTERM', 143], ['SIGHUP', 129]]) {
  process.once(signal, () => {
    for (const file of temps) fs.rmSync(file, { force: true })
    process.exit(code)
  })
}

main(process.argv, { stdin: process.stdin, stdout: process.stdout, stderr: process.stderr, temps }).then((code) => {
  process.exitCode = code
})

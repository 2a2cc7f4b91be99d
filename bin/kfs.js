#!/usr/bin/env node
'use strict'

const { main } = require('../lib/cli/program')

// A reader closing the pipe early (`kfs get KEY | head`) is not an error.
process.stdout.on('error', (err) => {
  if (err.code !== 'EPIPE') throw err
})

main(process.argv).then((code) => {
  process.exitCode = code
})

'use strict'

// The kfs command run as a real process on a store of each test's own, for the CLI's
// test files: `const c = useCli()` in a describe gives c.cli(args, { input, stdin, env }),
// c.file(name, data), c.t (useTmp) and c.db, the store's path (a test may change it).
const fs = require('node:fs')
const path = require('node:path')
const { spawn } = require('node:child_process')
const { useTmp } = require('./helpers')

const BIN = path.join(__dirname, '..', 'bin', 'kfs.js')

function useCli () {
  const t = useTmp()
  const c = { t, db: undefined }
  beforeEach(() => {
    c.db = path.join(t.dir, 'db')
  })

  // Runs `kfs args...` with KFS_DB set to the test's store, `input` written to its
  // standard input, or `stdin` given as it (a descriptor, 'ignore'); resolves to
  // { code, signal, stdout (Buffer), stderr (string) }.
  c.cli = (args, { input, stdin = 'pipe', env = {} } = {}) => new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], { stdio: [stdin, 'pipe', 'pipe'], env: { ...process.env, KFS_DB: c.db, KFS_DEBUG: '', ...env } })
    const out = []
    let stderr = ''
    child.stdout.on('data', (d) => out.push(d))
    child.stderr.on('data', (d) => (stderr += d))
    child.on('error', reject)
    child.on('close', (code, signal) => resolve({ code, signal, stdout: Buffer.concat(out), stderr }))
    if (child.stdin) {
      child.stdin.on('error', () => {})
      child.stdin.end(input)
    }
  })

  c.file = (name, data) => {
    const p = path.join(t.dir, name)
    fs.writeFileSync(p, data)
    return p
  }
  return c
}

module.exports = { useCli, BIN }

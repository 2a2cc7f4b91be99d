'use strict'

// Runs benchmark cases each in a child process of its own script: LevelDB runs every
// flush and compaction of a process on one background thread, so engines sharing a
// process would slow each other. The parent calls inChild(script, job), which starts the
// script again with `--child JSON`; there runScript() (script.js) calls serve(). The
// child writes its result as JSON on stdout; its stderr is the parent's.

const fs = require('node:fs')
const path = require('node:path')
const { spawn, execFileSync } = require('node:child_process')
const { once } = require('node:events')

const now = () => process.hrtime.bigint()
const msSince = (start) => Number(now() - start) / 1e6

async function inChild (script, job) {
  const child = spawn(process.execPath, [script, '--child', JSON.stringify(job)], { stdio: ['ignore', 'pipe', 'inherit'] })
  let out = ''
  child.stdout.on('data', (d) => (out += d))
  const [code] = await once(child, 'close') // after its stdout ended, unlike 'exit'
  if (code !== 0) throw new Error(`${job.name} (${job.engine}) failed with exit code ${code}`)
  return JSON.parse(out)
}

// In the child: runs cases[job.name](job) and writes its result.
function serve (cases, job) {
  cases[job.name](job).then((result) => process.stdout.write(JSON.stringify(result)), (err) => {
    process.stderr.write(`${err.stack}\n`)
    process.exit(1)
  })
}

// `kfs list [shard] > /dev/null`, end to end, as a user runs it: milliseconds.
function cliList (dir, shard) {
  const start = now()
  const devNull = fs.openSync('/dev/null', 'w')
  try {
    const argv = [path.join(__dirname, '..', 'bin', 'kfs.js'), 'list', '-d', dir]
    if (shard !== undefined) argv.push(String(shard))
    execFileSync(process.execPath, argv, { stdio: ['ignore', devNull, 'inherit'] })
  } finally {
    fs.closeSync(devNull)
  }
  return msSince(start)
}

module.exports = { inChild, serve, cliList, now, msSince }

'use strict'

// Processes that hold a store, for the tests of one store shared by many processes.
const path = require('node:path')
const { spawn } = require('node:child_process')

const ROOT = path.join(__dirname, '..')

// A process holding the store at `dir` until its stdin ends; resolves once it serves.
// stop() ends its stdin (it then closes the store and exits) and kill() is kill -9, each
// resolved once it is gone, as is `exited`.
function holder (dir, options = {}) {
  const script = `
    const store = require('./')(process.argv[1], ${JSON.stringify(options)})
    store.open().then(() => console.log('holding'))
    process.stdin.resume()
    process.stdin.on('end', () => store.close().then(() => process.exit(0)))`
  const child = spawn(process.execPath, ['-e', script, dir], { cwd: ROOT, stdio: ['pipe', 'pipe', 'inherit'] })
  const exited = new Promise((resolve) => child.once('exit', resolve))
  return new Promise((resolve, reject) => {
    child.stdout.once('data', () => resolve({
      child,
      exited,
      stop: () => { child.stdin.end(); return exited },
      kill: () => { child.kill('SIGKILL'); return exited }
    }))
    child.once('exit', (code) => reject(new Error(`the holder exited with ${code}`)))
  })
}

module.exports = { holder, ROOT }

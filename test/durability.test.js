'use strict'

// With sync: true, a write resolves only once every byte is durable (issue "Correct
// under every fault", item 2), checked by tracing the system calls with strace.
const { expect } = require('chai')
const fs = require('node:fs')
const path = require('node:path')
const { spawnSync } = require('node:child_process')
const { useTmp } = require('./helpers')

const ROOT = path.join(__dirname, '..')
const MiB = 1024 * 1024
const hasStrace = spawnSync('strace', ['-V']).status === 0

// Runs `script` under strace and returns the traced calls up to the moment the script
// wrote RESOLVED to stdout: [{ call, path }] with the path of the file descriptor.
function traceUntilResolved (script, dir) {
  const out = path.join(dir, 'trace.txt')
  const r = spawnSync('strace', ['-f', '-y', '-qq', '-o', out, '-e', 'trace=write,pwrite64,writev,fsync,fdatasync,rename,renameat,renameat2,unlink,unlinkat',
    process.execPath, '-e', script, path.join(dir, 'store')], { cwd: ROOT, encoding: 'utf8' })
  expect(r.status, r.stderr).to.equal(0)
  const calls = []
  for (const line of fs.readFileSync(out, 'utf8').split('\n')) {
    if (/^\d+\s+write\(1<[^>]*>, "RESOLVED/.test(line)) return calls
    const m = /^\d+\s+(\w+)\((?:(\d+)<([^>]*)>|"([^"]*)", (?:\d+<[^>]*>, )?"([^"]*)")/.exec(line)
    const unlinked = /^\d+\s+unlink(?:at)?\((?:\S+, )?"([^"]*)"/.exec(line)
    if (unlinked) calls.push({ call: 'unlink', path: unlinked[1] })
    else if (!m) continue
    else if (m[1].startsWith('rename')) calls.push({ call: 'rename', from: m[4], path: m[5] })
    else calls.push({ call: m[1], path: m[3] })
  }
  throw new Error('the script never wrote RESOLVED')
}

describe('durability with sync: true', function () {
  this.timeout(60000)
  const t = useTmp()

  before(function () {
    if (!hasStrace) {
      console.log('      skipped: strace is not installed (Debian package strace)')
      this.skip()
    }
  })

  it('every log that received the file\'s bytes, the new shard\'s directory and the usage marker are synced before the write resolves', () => {
    // 12 MiB passes LevelDB's 4 MiB write buffer several times, so the shard moves on
    // to new logs during the write.
    const script = `
      const store = require('./')(process.argv[1], { sync: true })
      store.writeFile('k', Buffer.alloc(${12 * MiB}, 7)).then(() => {
        require('node:fs').writeSync(1, 'RESOLVED\\n')
        return store.close()
      })`
    const calls = traceUntilResolved(script, t.dir)
    const store = path.join(t.dir, 'store')
    const isSync = (c) => c.call === 'fsync' || c.call === 'fdatasync'

    // Logs: LevelDB's write-ahead logs receive every byte first. Each must be synced
    // after its last write, or its content flushed to a table file that was synced
    // before the log was deleted. (Table files are written from logged data, and
    // LevelDB syncs each before it records it in its manifest.)
    const isWrite = (c) => ['write', 'pwrite64', 'writev'].includes(c.call)
    const logs = [...new Set(calls.filter((c) => /\.log$/.test(c.path || '') && isWrite(c)).map((c) => c.path))]
    const shardLogs = logs.filter((p) => /\/\d{3}\.s\/\d+\.log$/.test(p))
    expect(shardLogs.length, 'the write spans several logs').to.be.above(1)
    for (const log of logs) {
      const lastWrite = calls.findLastIndex((c) => c.path === log && isWrite(c))
      const synced = calls.findIndex((c, i) => i > lastWrite && c.path === log && isSync(c)) > -1
      const deleted = calls.findIndex((c, i) => i > lastWrite && c.call === 'unlink' && c.path === log)
      const tableSynced = deleted > -1 && calls.some((c, i) => i > lastWrite && i < deleted && isSync(c) &&
        /\.ldb$/.test(c.path) && path.dirname(c.path) === path.dirname(log))
      expect(synced || tableSynced, `${path.relative(store, log)} was written and neither synced nor flushed to a synced table before the write resolved`).to.equal(true)
    }

    // The new shard was renamed into place, then its directory synced.
    const renamed = calls.findIndex((c) => c.call === 'rename' && /\/\d{3}\.s$/.test(c.path))
    expect(renamed).to.be.above(-1)
    expect(calls.findIndex((c, i) => i > renamed && c.path === store && isSync(c)), 'store directory synced after the shard was renamed into place').to.be.above(-1)
  })
})

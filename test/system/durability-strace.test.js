'use strict'

// With sync: true, a write resolves only once every byte is durable (issue "Correct
// under every fault", item 2), checked by tracing the system calls with strace. (The
// tests of durability that need no strace are test/durability.test.js.)
const { expect } = require('chai')
const fs = require('node:fs')
const path = require('node:path')
const { spawnSync } = require('node:child_process')
const { useTmp, scaled } = require('../helpers')

const ROOT = path.join(__dirname, '..', '..')
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

// In a describe: its tests are skipped, saying why, where strace is missing.
function skipWithoutStrace () {
  before(function () {
    if (!hasStrace) {
      console.log('      skipped: strace is not installed (Debian package strace)')
      this.skip()
    }
  })
}

describe('durability with sync: true', function () {
  this.timeout(scaled(60000))
  const t = useTmp()

  skipWithoutStrace()

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

// Runs `script` under strace: [{ call, path, from }] of the calls that create, write,
// rename, remove or sync files, and succeeded; `path` is the file's, or the new name.
function trace (script, dir) {
  const out = path.join(dir, 'trace.txt')
  const r = spawnSync('strace', ['-f', '-y', '-qq', '-o', out, '-e', 'trace=openat,mkdir,mkdirat,write,pwrite64,fsync,fdatasync,rename,renameat,renameat2,unlink,unlinkat',
    process.execPath, '-e', script, dir], { cwd: ROOT, encoding: 'utf8' })
  expect(r.status, r.stderr).to.equal(0)
  const calls = []
  const unfinished = new Map() // pid -> the start of a call another thread's interrupted
  for (let line of fs.readFileSync(out, 'utf8').split('\n')) {
    const [, pid, start] = /^(\d+)\s+(.*) <unfinished \.\.\.>$/.exec(line) || []
    if (pid) {
      unfinished.set(pid, start)
      continue
    }
    const [, resumedPid, end] = /^(\d+)\s+<\.\.\. \w+ resumed>(.*)$/.exec(line) || []
    if (resumedPid) line = `${resumedPid} ${unfinished.get(resumedPid)}${end}`
    if (/ = -1 /.test(line) || !/ = \d+/.test(line)) continue
    const [, call, rest] = /^\d+\s+(\w+)\((.*)$/.exec(line) || []
    if (!call) continue
    const names = [...(rest || '').matchAll(/"([^"]*)"/g)].map((m) => m[1])
    if (call === 'openat') {
      if (/O_CREAT/.test(rest)) calls.push({ call: 'create', path: names[0] })
    } else if (call === 'mkdir' || call === 'mkdirat') {
      calls.push({ call: 'create', path: names[0] })
    } else if (call.startsWith('rename')) {
      calls.push({ call: 'rename', from: names[0], path: names[1] })
    } else if (call.startsWith('unlink')) {
      calls.push({ call: 'unlink', path: names[0] })
    } else {
      const fd = /^\d+<([^>]*)>/.exec(rest)
      if (fd) calls.push({ call: call === 'fdatasync' ? 'fsync' : call, path: fd[1] })
    }
  }
  return calls
}

// Whether every change to the entries of directory `dir` (those `which` selects) made
// before call number `before` was followed by a sync of `dir` before it.
function entriesSynced (calls, dir, before, which = () => true) {
  const lastChange = calls.findLastIndex((c, i) => i < before && ['create', 'rename', 'unlink'].includes(c.call) && which(c) &&
    (path.dirname(c.path) === dir || (c.from && path.dirname(c.from) === dir)))
  return calls.findIndex((c, i) => i > lastChange && i < before && c.call === 'fsync' && c.path === dir) > -1
}

// Issue 18, item 7: what is renamed into place must be whole after a power cut.
describe('durability of what is renamed into place', function () {
  this.timeout(scaled(60000))
  const t = useTmp()

  skipWithoutStrace()

  it('every entry of a new shard is durable before the shard is renamed into place, whatever LevelDB syncs itself', () => {
    const script = `
      const fs = require('node:fs')
      fs.mkdirSync(process.argv[1] + '/tmp')
      require('./lib/shard/create').createShard(process.argv[1] + '/000.s', process.argv[1] + '/tmp')`
    const calls = trace(script, t.dir)
    const renamed = calls.findIndex((c) => c.call === 'rename' && c.path === path.join(t.dir, '000.s'))
    expect(renamed).to.be.above(-1)
    const staging = calls[renamed].from
    // LevelDB 1.20 syncs the directory whenever it syncs a manifest, which the flush
    // does last: the files it needs (CURRENT, manifest, log, table) are covered by that.
    expect(calls.some((c, i) => i < renamed && c.call === 'rename' && c.path === path.join(staging, 'CURRENT'))).to.equal(true)
    expect(entriesSynced(calls, staging, renamed, (c) => c.call !== 'unlink'), 'the files LevelDB needs').to.equal(true)
    // The removal of the replayed log comes after that, and kfs syncs it too: a shard
    // created must not depend on the order of LevelDB's work.
    expect(entriesSynced(calls, staging, renamed), 'every entry of the staging directory synced before it was renamed').to.equal(true)
    expect(calls.findIndex((c, i) => i > renamed && c.call === 'fsync' && c.path === t.dir)).to.be.above(renamed)
  })

  it('a spare shard is whole before it is renamed into place, and the store marks a new shard known only once it is in place', () => {
    const script = `
      const store = require('./')(process.argv[1] + '/store', { openAhead: false }) // shards made by writes, from spares
      ;(async () => {
        for (let i = 0; i < 24; i++) await store.writeFile('k' + i, 'x')
        await store.close()
      })()`
    const calls = trace(script, t.dir)
    const renames = calls.map((c, i) => [c, i]).filter(([c]) => c.call === 'rename' && /\/\d{3}\.s$/.test(c.path))
    const fromSpares = renames.filter(([c]) => /\/tmp\/spare-[0-9a-f]+$/.test(c.from))
    expect(fromSpares.length, 'shards made from spares').to.be.above(4)
    for (const [{ from, path: location }, renamed] of fromSpares) {
      const written = [...new Set(calls.filter((c, i) => i < renamed && c.call === 'write' && path.dirname(c.path) === from).map((c) => c.path))]
      expect(written, from).to.have.length(3) // CURRENT, the manifest, the table
      for (const file of written) {
        const lastWrite = calls.findLastIndex((c, i) => i < renamed && c.call === 'write' && c.path === file)
        expect(calls.findIndex((c, i) => i > lastWrite && i < renamed && c.call === 'fsync' && c.path === file), `${file} synced`).to.be.above(-1)
      }
      expect(entriesSynced(calls, from, renamed), `the entries of ${from} synced`).to.equal(true)
      // The usage cache's synced mark of this shard comes after its directory entry is
      // durable: the first sync of the state's log after the rename follows that sync.
      const placed = calls.findIndex((c, i) => i > renamed && c.call === 'fsync' && c.path === path.join(t.dir, 'store'))
      const marked = calls.findIndex((c, i) => i > renamed && c.call === 'fsync' && /\/state\/\d+\.log$/.test(c.path))
      expect(placed, `${location} synced into its directory`).to.be.above(renamed)
      expect(marked, `${location} marked`).to.be.above(placed)
    }
  })

  it('the disk reserve\'s bytes are synced before it is renamed into place, and its directory after', () => {
    const script = `
      const fs = require('node:fs')
      const { DiskReserve } = require('./lib/dir/disk-reserve')
      fs.mkdirSync(process.argv[1] + '/tmp')
      new DiskReserve(process.argv[1], process.argv[1] + '/tmp', ${2 * MiB}).init()`
    const calls = trace(script, t.dir)
    const reserve = path.join(t.dir, 'reserve')
    expect(fs.statSync(reserve).size).to.equal(2 * MiB)
    const renamed = calls.findIndex((c) => c.call === 'rename' && c.path === reserve)
    expect(renamed).to.be.above(-1)
    const tmp = calls[renamed].from
    const lastWrite = calls.findLastIndex((c) => c.path === tmp && c.call.startsWith('write'))
    expect(lastWrite).to.be.above(-1)
    expect(calls.findIndex((c, i) => i > lastWrite && i < renamed && c.call === 'fsync' && c.path === tmp), 'reserve synced before the rename').to.be.above(-1)
    expect(calls.findIndex((c, i) => i > renamed && c.call === 'fsync' && c.path === t.dir), 'store directory synced after the rename').to.be.above(-1)
  })

  it('a new store\'s state is made whole in tmp/ and renamed into place, and each directory made for the store is synced into its parent, before the open resolves', () => {
    const script = `
      const store = require('./')(process.argv[1] + '/a/b/store')
      store.open().then(() => {
        require('node:fs').mkdirSync(process.argv[1] + '/resolved')
        return store.close()
      })`
    const calls = trace(script, t.dir)
    const store = path.join(t.dir, 'a/b/store')
    const resolved = calls.findIndex((c) => c.call === 'create' && c.path === path.join(t.dir, 'resolved'))
    const renamed = calls.findIndex((c) => c.call === 'rename' && c.path === path.join(store, 'state'))
    expect(renamed, 'state renamed into place').to.be.above(-1)
    expect(renamed).to.be.below(resolved)
    expect(calls.some((c, i) => i < renamed && c.call === 'create' && c.path === path.join(store, 'state'))).to.equal(false)
    const staging = calls[renamed].from
    expect(path.dirname(staging)).to.equal(path.join(store, 'tmp'))
    expect(entriesSynced(calls, staging, renamed), 'every entry of the new state synced before its rename').to.equal(true)
    expect(entriesSynced(calls, store, resolved, (c) => c.path === path.join(store, 'state')), 'state synced into the store').to.equal(true)
    for (const made of ['a', 'a/b', 'a/b/store']) {
      const dir = path.dirname(path.join(t.dir, made))
      expect(entriesSynced(calls, dir, resolved, (c) => c.path === path.join(t.dir, made)), `${made} synced into ${dir}`).to.equal(true)
    }
  })

  it('a synced write that went into a log LevelDB started meanwhile syncs the log\'s directory before it resolves', () => {
    // 1 MiB writes into one shard: LevelDB switches to a new log about every fourth.
    const script = `
      const fs = require('node:fs')
      const store = require('./')(process.argv[1] + '/store', { sync: true, shardCount: 1 })
      ;(async () => {
        for (let i = 0; i < 24; i++) {
          await store.writeFile('k' + (i % 3), Buffer.alloc(${MiB}, i))
          fs.mkdirSync(process.argv[1] + '/resolved-' + i)
        }
        await store.close()
      })()`
    const calls = trace(script, t.dir)
    const resolvedAt = calls.map((c, i) => [c, i]).filter(([c]) => c.call === 'create' && /\/resolved-\d+$/.test(c.path)).map(([, i]) => i)
    expect(resolvedAt).to.have.length(24)
    let checked = 0
    resolvedAt.forEach((resolved, n) => {
      const began = n ? resolvedAt[n - 1] : 0
      const logs = new Set(calls.filter((c, i) => i > began && i < resolved && c.call === 'fsync' && /\/\d{3}\.s\/\d+\.log$/.test(c.path)).map((c) => c.path))
      for (const log of logs) {
        checked++
        // The log's creation, not its removal: LevelDB removes a log once its memtable
        // is in a table it synced, and then the write is durable with the table.
        const made = (c) => c.call === 'create' && c.path === log
        expect(entriesSynced(calls, path.dirname(log), resolved, made), `write ${n}: ${path.basename(log)} synced into its directory`).to.equal(true)
      }
    })
    const logsMade = calls.filter((c) => c.call === 'create' && /\/\d{3}\.s\/\d+\.log$/.test(c.path)).length
    expect(logsMade, 'new logs started during the writes').to.be.above(3)
    expect(checked).to.be.at.least(24)
  })
})

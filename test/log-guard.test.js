'use strict'

const { expect } = require('chai')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { spawn, spawnSync } = require('node:child_process')
const leveldown = require('leveldown')
const { LevelDb } = require('../lib/leveldb/leveldb')
const { guardedOpen, readManifest, logName, keptName, lockHeld } = require('../lib/leveldb/log-guard')
const { parseManifest } = require('../lib/leveldb/manifest')
const { useTmp, rejects, scaled } = require('./helpers')
const { holder, heldAndFreed } = require('./fixtures/lock-holder')

const ROOT = path.join(__dirname, '..')
const COUNT = 200
const key = (i) => `key-${String(i).padStart(4, '0')}`

// LevelDB's write-ahead log format (db/log_writer.cc), to make manifests and logs.
const BLOCK = 32768
const CRC_TABLE = Array.from({ length: 256 }, (_, n) => {
  let c = n
  for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ 0x82f63b78 : c >>> 1
  return c >>> 0
})

function crc32c (buffer) {
  let c = ~0
  for (const byte of buffer) c = CRC_TABLE[(c ^ byte) & 0xff] ^ (c >>> 8)
  return ~c >>> 0
}

function logFile (records) {
  const out = []
  let offset = 0
  for (const record of records) {
    let left = record
    let first = true
    do {
      if (BLOCK - offset < 7) {
        out.push(Buffer.alloc(BLOCK - offset))
        offset = 0
      }
      const fragment = left.subarray(0, BLOCK - offset - 7)
      left = left.subarray(fragment.length)
      const type = first ? (left.length === 0 ? 1 : 2) : (left.length === 0 ? 4 : 3)
      const header = Buffer.alloc(7)
      const crc = crc32c(Buffer.concat([Buffer.from([type]), fragment]))
      header.writeUInt32LE((((crc >>> 15) | (crc << 17)) + 0xa282ead8) >>> 0, 0) // masked, as LevelDB stores it
      header.writeUInt16LE(fragment.length, 4)
      header[6] = type
      out.push(header, fragment)
      offset += 7 + fragment.length
      first = false
    } while (left.length > 0)
  }
  return Buffer.concat(out)
}

function varint (n) {
  const out = []
  for (; n >= 128; n = Math.floor(n / 128)) out.push((n % 128) | 128)
  out.push(n)
  return Buffer.from(out)
}

const string = (s) => Buffer.concat([varint(Buffer.byteLength(s)), Buffer.from(s)])

// A WriteBatch (db/write_batch.cc) of puts, its first sequence number `sequence`.
function batch (sequence, puts) {
  const head = Buffer.alloc(12)
  head.writeBigUInt64LE(BigInt(sequence), 0)
  head.writeUInt32LE(Object.keys(puts).length, 8)
  return Buffer.concat([head, ...Object.entries(puts).map(([k, v]) => Buffer.concat([Buffer.from([1]), string(k), string(v)]))])
}

// The raw binding, without the guard: what LevelDB alone does.
function raw (dir) {
  const db = leveldown(dir)
  const call = (method, ...args) => new Promise((resolve, reject) => db[method](...args, (err, value) => (err ? reject(err) : resolve(value))))
  return {
    open: (options = {}) => call('open', { createIfMissing: true, ...options }),
    put: (k, v) => call('put', k, v),
    flush: () => call('compactRange', '\x00', '\x00'),
    close: () => call('close')
  }
}

async function count (dir) {
  const db = await LevelDb.open(dir)
  try {
    let found = 0
    for (let i = 0; i < COUNT; i++) if ((await db.get(key(i))) !== undefined) found++
    return found
  } finally {
    await db.close()
  }
}

// Writes COUNT records into a log and closes without a flush (LevelDB writes no table
// at close), as a close that skipped Shard.close's flush would leave them.
async function unflushed (dir) {
  const db = raw(dir)
  await db.open()
  for (let i = 0; i < COUNT; i++) await db.put(key(i), `value ${i}`)
  await db.close()
}

// One record written and flushed into a table: a database whose log holds nothing.
async function flushed (dir) {
  const db = raw(dir)
  await db.open()
  await db.put('k', 'v')
  await db.flush()
  await db.close()
}

// A database with two live logs, as a crash right after LevelDB switched to a new one
// leaves: `a` written in both, `b` only in the older. Resolves to the logs' numbers.
async function twoLogs (dir) {
  const db = raw(dir)
  await db.open()
  await db.close()
  const { logNumber } = await readManifest(dir)
  fs.writeFileSync(path.join(dir, logName(logNumber + 1)), logFile([batch(1, { a: 'old', b: 'only in the older log' })]))
  fs.writeFileSync(path.join(dir, logName(logNumber + 2)), logFile([batch(3, { a: 'new' })]))
  return [logNumber + 1, logNumber + 2]
}

async function expectTwoLogsRead (dir) {
  const db = await LevelDb.open(dir)
  try {
    expect(String(await db.get('a'))).to.equal('new')
    expect(String(await db.get('b'))).to.equal('only in the older log')
  } finally {
    await db.close()
  }
}

const files = (dir, pattern) => fs.readdirSync(dir).filter((name) => pattern.test(name)).sort()
const logNumbers = (dir) => files(dir, /^\d+\.log$/).map((name) => parseInt(name, 10))
const keptLinks = (dir) => files(dir, /^kfs-kept-/)

// Runs a script in a child process (cwd: the package) with `args` as process.argv[1...];
// resolves to what it printed last, parsed as JSON, and how it exited.
function child (script, args, env = {}) {
  return new Promise((resolve, reject) => {
    const proc = spawn(process.execPath, ['-e', script, ...args], { cwd: ROOT, env: { ...process.env, ...env } })
    let stdout = ''
    let stderr = ''
    proc.stdout.on('data', (d) => (stdout += d))
    proc.stderr.on('data', (d) => (stderr += d))
    const timer = setTimeout(() => proc.kill('SIGKILL'), scaled(20000))
    proc.on('error', reject)
    proc.on('exit', (code, signal) => {
      clearTimeout(timer)
      const last = stdout.trim().split('\n').pop()
      if (code !== 0 && signal !== 'SIGKILL') return reject(new Error(`child exited with ${code}: ${stderr}`))
      resolve({ result: last ? JSON.parse(last) : undefined, signal, stderr })
    })
  })
}

// Writes COUNT records through LevelDb, then dies by SIGKILL: the log holds them all.
const CRASH_WRITER = `
const { LevelDb } = require('./lib/leveldb/leveldb')
LevelDb.open(process.argv[1], { createIfMissing: true }).then(async (db) => {
  for (let i = 0; i < ${COUNT}; i++) await db.put('key-' + String(i).padStart(4, '0'), 'value ' + i)
  process.kill(process.pid, 'SIGKILL')
})`

// Opens through LevelDb (guarded) or the raw binding; prints the records found or the error.
const OPENER = `
const [dir, how] = process.argv.slice(1)
const keys = Array.from({ length: ${COUNT} }, (_, i) => 'key-' + String(i).padStart(4, '0'))
async function main () {
  let db
  if (how === 'raw') {
    const binding = require('leveldown')(dir)
    await new Promise((resolve, reject) => binding.open({ createIfMissing: false }, (err) => (err ? reject(err) : resolve())))
    db = {
      get: (k) => new Promise((resolve) => binding.get(k, (err, v) => resolve(err ? undefined : v))),
      close: () => new Promise((resolve) => binding.close(resolve))
    }
  } else {
    db = await require('./lib/leveldb/leveldb').LevelDb.open(dir)
  }
  let found = 0
  for (const k of keys) if ((await db.get(k)) !== undefined) found++
  await db.close()
  return { found }
}
main().then((r) => console.log(JSON.stringify(r)), (err) => console.log(JSON.stringify({ code: err.code, reason: err.reason, message: err.message })))`

// Makes fopen() fail with EMFILE, as when the process is out of descriptors, for paths
// ending in $KFS_SHIM_SUFFIX opened with a mode starting with $KFS_SHIM_MODE, the first
// time only. LevelDB 1.20 opens a log to replay with fopen(name, "r") (PosixEnv::
// NewSequentialFile) and its info LOG with fopen(name, "w") (NewLogger); the binding
// links fopen64.
const SHIM = `
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failed = 0;

static int fails (const char *path, const char *mode) {
  const char *suffix = getenv("KFS_SHIM_SUFFIX"), *prefix = getenv("KFS_SHIM_MODE");
  size_t n = strlen(path);
  if (!suffix || !prefix || n < strlen(suffix) || strcmp(path + n - strlen(suffix), suffix) != 0) return 0;
  if (strncmp(mode, prefix, strlen(prefix)) != 0) return 0;
  return __atomic_exchange_n(&failed, 1, __ATOMIC_SEQ_CST) == 0;
}

#define WRAP(name) \\
  FILE *name (const char *path, const char *mode) { \\
    static FILE *(*real) (const char *, const char *); \\
    if (!real) real = (FILE *(*) (const char *, const char *)) dlsym(RTLD_NEXT, #name); \\
    if (fails(path, mode)) { errno = EMFILE; return NULL; } \\
    return real(path, mode); \\
  }

WRAP(fopen)
WRAP(fopen64)
`

describe('the log guard', function () {
  this.timeout(scaled(30000))
  const t = useTmp()

  describe('finding the logs LevelDB replays', () => {
    it('reads the log number from a real manifest: the unflushed log is live, an older one is not', async () => {
      const dir = path.join(t.dir, 'db')
      await unflushed(dir)
      const manifest = await readManifest(dir)
      const [log] = logNumbers(dir)
      expect(logNumbers(dir)).to.have.length(1)
      expect(fs.statSync(path.join(dir, logName(log))).size).to.be.above(0)
      expect(manifest.logNumber).to.equal(log)
      expect(manifest.prevLogNumber).to.equal(0)
      const numbered = fs.readdirSync(dir).map((n) => /^(?:MANIFEST-)?(\d+)/.exec(n)).filter(Boolean).map((m) => Number(m[1]))
      expect(manifest.nextFile).to.be.above(Math.max(...numbered))

      // LevelDB agrees: it replays that log. A flush then leaves only an empty live log.
      const db = raw(dir)
      await db.open()
      expect(fs.readFileSync(path.join(dir, 'LOG'), 'utf8')).to.include(`Recovering log #${log}\n`)
      await db.flush()
      await db.close()
      const after = await readManifest(dir)
      expect(after.logNumber).to.be.above(log)
      for (const n of logNumbers(dir)) {
        if (n >= after.logNumber) expect(fs.statSync(path.join(dir, logName(n))).size, logName(n)).to.equal(0)
      }
      expect(logNumbers(dir)).to.include(after.logNumber)
    })

    it('reads a manifest whose records span blocks (a 100 KB key)', async () => {
      const dir = path.join(t.dir, 'db')
      const db = raw(dir)
      await db.open()
      await db.put('k'.repeat(100000), 'v')
      await db.flush()
      await db.put('unflushed', 'v')
      await db.close()
      const manifestName = fs.readFileSync(path.join(dir, 'CURRENT'), 'latin1').trim()
      expect(fs.statSync(path.join(dir, manifestName)).size).to.be.above(2 * BLOCK)
      const manifest = await readManifest(dir)
      const live = logNumbers(dir).filter((n) => n >= manifest.logNumber)
      expect(live).to.have.length(1)
      expect(fs.statSync(path.join(dir, logName(live[0]))).size).to.be.above(0)
    })

    it('parses every VersionEdit field, 64-bit numbers, a torn tail, and gives up on an unknown tag', () => {
      const big = 2 ** 40 + 3
      const edit = (...fields) => Buffer.concat(fields)
      const records = [
        edit(varint(1), string('leveldb.BytewiseComparator'), varint(2), varint(5), varint(3), varint(9), varint(4), varint(2 ** 50)),
        edit(varint(7), varint(0), varint(7), varint(1234), string('a'.repeat(40000)), string('z'.repeat(40000))),
        edit(varint(5), varint(1), string('m'), varint(6), varint(0), varint(7)),
        edit(varint(2), varint(big), varint(9), varint(2 ** 35), varint(3), varint(big + 1))
      ]
      expect(parseManifest(logFile(records))).to.deep.equal({ logNumber: big, prevLogNumber: 2 ** 35, nextFile: big + 1 })
      // A record cut short by a crash is not there for LevelDB either.
      const torn = logFile(records).subarray(0, -3)
      expect(parseManifest(torn)).to.deep.equal({ logNumber: 5, prevLogNumber: 0, nextFile: 9 })
      expect(parseManifest(logFile([...records, edit(varint(8), varint(1))]))).to.equal(undefined)
      expect(parseManifest(Buffer.alloc(0))).to.equal(undefined)
    })
  })

  describe('a log LevelDB cannot open', () => {
    let shimDir
    let shim
    before(function () {
      if (process.platform !== 'linux') {
        console.log('      skipped: LD_PRELOAD fault injection needs Linux')
        return this.skip()
      }
      shimDir = fs.mkdtempSync(path.join(os.tmpdir(), 'kfs-shim-'))
      fs.writeFileSync(path.join(shimDir, 'shim.c'), SHIM)
      shim = path.join(shimDir, 'shim.so')
      const cc = spawnSync(process.env.CC || 'cc', ['-shared', '-fPIC', '-o', shim, path.join(shimDir, 'shim.c'), '-ldl'], { encoding: 'utf8' })
      if (cc.error || cc.status !== 0) {
        console.log(`      skipped: no C compiler to build the fopen() shim (${cc.error ? cc.error.code : cc.stderr.trim()})`)
        return this.skip()
      }
    })
    after(() => shimDir && fs.rmSync(shimDir, { recursive: true, force: true }))

    const failing = (suffix, mode = 'r') => ({ LD_PRELOAD: shim, KFS_SHIM_SUFFIX: suffix, KFS_SHIM_MODE: mode })

    it('fails the open with EMFILE instead of losing the records, which the next open finds', async () => {
      const dir = path.join(t.dir, 'db')
      const crash = await child(CRASH_WRITER, [dir])
      expect(crash.signal).to.equal('SIGKILL')
      const [log] = logNumbers(dir)
      expect(fs.statSync(path.join(dir, logName(log))).size).to.be.above(0)

      const { result } = await child(OPENER, [dir], failing('.log'))
      expect(result).to.include({ code: 'EMFILE', reason: 'system' }) // unguarded: { found: 0 }
      expect(result.message).to.include('Too many open files')
      // LevelDB deleted the log; the guard's link became the newest file in its place.
      expect(logNumbers(dir)).not.to.include(log)
      const newest = Math.max(...fs.readdirSync(dir).map((n) => /^(?:MANIFEST-)?(\d+)/.exec(n)).filter(Boolean).map((m) => Number(m[1])))
      expect(fs.statSync(path.join(dir, logName(newest))).size).to.be.above(0)
      expect(keptLinks(dir)).to.deep.equal([])

      expect(await count(dir)).to.equal(COUNT)
      expect(keptLinks(dir)).to.deep.equal([])
      expect(logNumbers(dir).map((n) => fs.statSync(path.join(dir, logName(n))).size)).to.deep.equal([0])
    })

    it('fails the open with EMFILE when LevelDB could not create its info LOG to tell', async () => {
      const dir = path.join(t.dir, 'db')
      await unflushed(dir)
      const { result } = await child(OPENER, [dir], failing('/LOG', 'w'))
      expect(result).to.include({ code: 'EMFILE', reason: 'system' })
      expect(await count(dir)).to.equal(COUNT)
      expect(keptLinks(dir)).to.deep.equal([])
    })

    it('replays every kept log again, in order, when it skipped an older one: newer records still win', async () => {
      const dir = path.join(t.dir, 'db')
      const [older] = await twoLogs(dir)
      const { result } = await child(OPENER, [dir], failing(`/${logName(older)}`))
      expect(result).to.include({ code: 'EMFILE', reason: 'system' }) // unguarded: b is gone
      await expectTwoLogsRead(dir)
      expect(keptLinks(dir)).to.deep.equal([])
    })

    it('restores the links an open interrupted after LevelDB deleted the logs left behind', async () => {
      const dir = path.join(t.dir, 'db')
      await unflushed(dir)
      const [log] = logNumbers(dir)
      fs.linkSync(path.join(dir, logName(log)), path.join(dir, keptName(log))) // the guard's first step
      // LevelDB alone skips the log, opens "successfully" and deletes it: the records are
      // gone but for the link (the process then died before the guard went on).
      const { result } = await child(OPENER, [dir, 'raw'], failing('.log'))
      expect(result).to.deep.equal({ found: 0 })
      expect(logNumbers(dir)).not.to.include(log)
      expect(keptLinks(dir)).to.deep.equal([keptName(log)])

      expect(await count(dir)).to.equal(COUNT)
      expect(keptLinks(dir)).to.deep.equal([])
    })

    it('has repair restore such links too', async () => {
      const dir = path.join(t.dir, 'db')
      await unflushed(dir)
      const [log] = logNumbers(dir)
      fs.linkSync(path.join(dir, logName(log)), path.join(dir, keptName(log)))
      expect((await child(OPENER, [dir, 'raw'], failing('.log'))).result).to.deep.equal({ found: 0 })
      await LevelDb.repair(dir)
      expect(keptLinks(dir)).to.deep.equal([])
      expect(await count(dir)).to.equal(COUNT)
    })
  })

  it('restores the links an open interrupted before LevelDB replayed the logs: replayed twice, in order, harmlessly', async () => {
    const dir = path.join(t.dir, 'db')
    const logs = await twoLogs(dir)
    for (const n of logs) fs.linkSync(path.join(dir, logName(n)), path.join(dir, keptName(n)))
    await expectTwoLogsRead(dir)
    expect(keptLinks(dir)).to.deep.equal([])
    const replayed = [...fs.readFileSync(path.join(dir, 'LOG'), 'utf8').matchAll(/Recovering log #(\d+)/g)].map((m) => Number(m[1]))
    expect(replayed.slice(0, 3)).to.deep.equal([logs[0] - 1, ...logs]) // the empty current log, then the two
    expect(replayed.slice(3)).to.have.length(2)
    expect(Math.min(...replayed.slice(3))).to.be.above(logs[1])
  })

  it('leaves the files of a database open elsewhere alone', async () => {
    const dir = path.join(t.dir, 'db')
    const db = await LevelDb.open(dir, { createIfMissing: true })
    try {
      await db.put('k', 'v') // its log is not empty
      const err = await rejects(LevelDb.open(dir), undefined)
      expect(err.reason).to.equal('locked')
      expect(keptLinks(dir)).to.deep.equal([])
      expect(String(await db.get('k'))).to.equal('v')
    } finally {
      await db.close()
    }
  })

  describe('syncing the directory after each change, before its next step', () => {
    // Runs guardedOpen(dir) with `open` standing for LevelDB's open, recording what the
    // guard does to the directory, in order: links, renames, removals, syncs of the
    // directory itself (lib/base/sync-dir.js opens it and syncs the handle), open and close.
    // Resolves to { events, err } (err: what guardedOpen rejected with).
    async function record (dir, open) {
      const events = []
      const name = (file) => path.basename(String(file))
      const fsp = require('node:fs/promises')
      const real = { link: fsp.link, unlink: fsp.unlink, rename: fsp.rename, open: fsp.open }
      fsp.link = async (from, to) => { await real.link(from, to); events.push(`link ${name(to)}`) }
      fsp.rename = async (from, to) => { await real.rename(from, to); events.push(`rename ${name(from)} ${name(to)}`) }
      fsp.unlink = async (file) => { await real.unlink(file); events.push(`unlink ${name(file)}`) }
      fsp.open = async (file, ...rest) => {
        const handle = await real.open(file, ...rest)
        if (path.resolve(String(file)) === dir) {
          const sync = handle.sync.bind(handle)
          handle.sync = async () => { await sync(); events.push('sync') }
        }
        return handle
      }
      let err
      try {
        await guardedOpen(dir, {
          open: async () => { events.push('open'); await open() },
          close: async () => events.push('close'),
          classify: (status) => new Error(status)
        })
      } catch (e) {
        err = e
      } finally {
        Object.assign(fsp, real)
      }
      return { events, err }
    }

    // A real open through the binding; close() closes it.
    function binding (dir) {
      const db = leveldown(dir)
      return {
        open: () => new Promise((resolve, reject) => db.open({ createIfMissing: false }, (err) => (err ? reject(err) : resolve()))),
        close: () => new Promise((resolve) => db.close(resolve))
      }
    }

    async function oneLog (dir) {
      const db = raw(dir)
      await db.open()
      await db.put('k', 'v')
      await db.close() // its log holds the record: the guard keeps a link to it
      const [log] = logNumbers(dir).filter((n) => fs.statSync(path.join(dir, logName(n))).size > 0)
      return log
    }

    it('makes its links durable before LevelDB opens, and their removal after', async () => {
      const dir = path.join(t.dir, 'db')
      const log = await oneLog(dir)
      const db = binding(dir)
      const { events, err } = await record(dir, db.open)
      await db.close()
      expect(err).to.equal(undefined)
      expect(events).to.deep.equal([`link ${keptName(log)}`, 'sync', 'open', `unlink ${keptName(log)}`, 'sync'])
    })

    it('turns the links an interrupted open left back into logs one durable rename at a time, before it links anew', async () => {
      const dir = path.join(t.dir, 'db')
      const logs = await twoLogs(dir)
      for (const n of logs) fs.linkSync(path.join(dir, logName(n)), path.join(dir, keptName(n)))
      const db = binding(dir)
      const { events, err } = await record(dir, db.open)
      await db.close()
      expect(err).to.equal(undefined)
      const [first, second] = events.filter((e) => e.startsWith('rename ')).map((e) => Number(e.split(' ')[2].slice(0, -'.log'.length)))
      expect(first).to.be.above(logs[1])
      const live = [...logs, first, second]
      expect(events).to.deep.equal([
        `rename ${keptName(logs[0])} ${logName(first)}`, 'sync',
        `rename ${keptName(logs[1])} ${logName(second)}`, 'sync',
        ...live.map((n) => `link ${keptName(n)}`), 'sync',
        'open',
        ...live.flatMap((n) => [`unlink ${keptName(n)}`, 'sync'])
      ])
      await expectTwoLogsRead(dir)
    })

    it('turns its links back into logs durably when it cannot tell that LevelDB replayed them', async () => {
      const dir = path.join(t.dir, 'db')
      const log = await oneLog(dir)
      // An "open" that leaves LevelDB's LOG as it was: the guard cannot tell that the log
      // was replayed, so the open fails and the link becomes the newest log.
      const { events, err } = await record(dir, async () => {})
      expect(err).to.include({ code: 'EMFILE', reason: 'system' })
      const renamed = events.find((e) => e.startsWith('rename ')).split(' ')[2]
      expect(events).to.deep.equal([`link ${keptName(log)}`, 'sync', 'open', `rename ${keptName(log)} ${renamed}`, 'sync', 'close'])
      expect(keptLinks(dir)).to.deep.equal([])
      const opened = await LevelDb.open(dir) // replays it
      try {
        expect(String(await opened.get('k'))).to.equal('v')
      } finally {
        await opened.close()
      }
    })

    it('removes its links durably when the open fails', async () => {
      const dir = path.join(t.dir, 'db')
      const log = await oneLog(dir)
      const failure = Object.assign(new Error('open failed'), { reason: 'corruption' })
      const { events, err } = await record(dir, async () => { throw failure })
      expect(err).to.equal(failure)
      expect(events).to.deep.equal([`link ${keptName(log)}`, 'sync', 'open', `unlink ${keptName(log)}`, 'sync'])
      expect(keptLinks(dir)).to.deep.equal([])
    })
  })

  // droppedOnRecovery() reads LevelDB's LOG only when the guard says a log was replayed:
  // a path that says no while LevelDB replayed one would forget the damage.
  describe('saying whether LevelDB replayed a log', () => {
    it('no for a flushed database, yes for one whose log holds records', async () => {
      const dir = path.join(t.dir, 'db')
      await flushed(dir)
      const binding = (d) => ({ open: () => d.open({ createIfMissing: false }), close: () => d.close(), classify: (status) => new Error(status) })
      let opened = raw(dir)
      expect(await guardedOpen(dir, binding(opened))).to.equal(false)
      await opened.close()
      await unflushed(dir)
      opened = raw(dir)
      expect(await guardedOpen(dir, binding(opened))).to.equal(true)
      await opened.close()
    })

    it('reports what LevelDB dropped from the logs of a database made over them, its CURRENT gone', async () => {
      const dir = path.join(t.dir, 'db')
      await unflushed(dir)
      const [log] = logNumbers(dir)
      const file = path.join(dir, logName(log))
      const buf = fs.readFileSync(file)
      for (let i = buf.length - 40; i < buf.length - 20; i++) buf[i] ^= 0xff // inside the last record
      fs.writeFileSync(file, buf)
      for (const name of fs.readdirSync(dir)) if (name === 'CURRENT' || name.startsWith('MANIFEST-')) fs.rmSync(path.join(dir, name))
      const db = await LevelDb.open(dir, { createIfMissing: true })
      try {
        expect(await db.get(key(0))).to.not.equal(undefined) // LevelDB replayed the log
        const dropped = await db.droppedOnRecovery()
        expect(dropped).to.have.length(1)
        expect(dropped[0]).to.match(/dropping \d+ bytes/)
      } finally {
        await db.close()
      }
    })
  })

  it('adds nothing to a cleanly closed database: no link, no file left', async () => {
    const dir = path.join(t.dir, 'db')
    await flushed(dir)
    const before = fs.readdirSync(dir).sort()
    const opened = await LevelDb.open(dir)
    await opened.close()
    expect(keptLinks(dir)).to.deep.equal([])
    expect(fs.readdirSync(dir).filter((n) => !before.includes(n)).every((n) => /^(\d+\.(log|ldb)|MANIFEST-\d+|LOG\.old)$/.test(n))).to.equal(true)
  })

  // The guard must never take another process's database for free: it would move that
  // process's logs (issue 18, item 7).
  describe('knowing that another process holds a database', () => {
    it('sees the lock of a database open in another process, and its release', async () => {
      await heldAndFreed(path.join(t.dir, 'db'))
    })

    it('does not report a lock released since the recent read of /proc/locks it reuses', async () => {
      const dir = path.join(t.dir, 'db')
      const held = await holder(dir)
      const now = Date.now
      const frozen = now()
      Date.now = () => frozen // every read below is within the recent read's age
      try {
        expect(await lockHeld(dir, { recent: true }), 'held').to.equal(true)
        await held.release()
        expect(await lockHeld(dir, { recent: true }), 'freed').to.equal(false)
      } finally {
        Date.now = now
        await held.release()
      }
    })
  })
})

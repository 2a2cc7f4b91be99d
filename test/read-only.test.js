'use strict'

// A store that cannot be written can be read (issue 20, item 5): `readOnly` opens the
// state and the shards through shadows in os.tmpdir() and writes nothing in the store.
const { expect } = require('chai')
const fs = require('node:fs')
const path = require('node:path')
const { Readable } = require('node:stream')
const { pipeline } = require('node:stream/promises')
const { classifyOpenError, openFailure } = require('../lib/leveldb/classify')
const { spawn, spawnSync, execFileSync } = require('node:child_process')
const kfs = require('..')
const { useTmp, rejects, bytes, sha256, toFormat1, scaled, sleep } = require('./helpers')
const { FILES } = require('./fixtures/read-only-files')
const { tree, writeStore, readsEverything, cli, useShadows } = require('./fixtures/read-only-checks')

// Writes the files in a child process that is then killed: its shards and state keep
// their writes in LevelDB logs, which the next open replays.
function writeAndCrash (dir) {
  const r = spawnSync(process.execPath, [path.join(__dirname, 'fixtures', 'read-only-files.js'), dir], { encoding: 'utf8' })
  expect(r.signal, r.stderr).to.equal('SIGKILL')
}

describe('a store opened read-only', function () {
  this.timeout(scaled(60000))
  const t = useTmp()
  const sh = useShadows(t) // sh.dir: os.tmpdir() while a test runs, where shadows go
  const { open, pause } = sh
  // What shadows are named for besides their process: its pid namespace and boot.
  const ns = /\[(\d+)\]/.exec(fs.readlinkSync('/proc/self/ns/pid'))[1]
  const boot = fs.readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').slice(0, 8)

  it('reads every file, lists, stats, verifies and writes nothing in the store; its shadows go at close', async () => {
    const dir = path.join(t.dir, 'store')
    await writeStore(dir)
    const before = tree(dir)
    await pause()
    const store = open(dir, { readOnly: true })
    await readsEverything(store)
    expect(fs.readdirSync(sh.dir).length).to.be.above(1) // the state and the shards read
    await store.close()
    expect(tree(dir)).to.deep.equal(before)
    expect(fs.readdirSync(sh.dir)).to.deep.equal([])
  })

  it('a process that exits without closing the store leaves no shadow behind', async () => {
    const dir = path.join(t.dir, 'store')
    await writeStore(dir)
    const script = `
      const store = require(${JSON.stringify(path.join(__dirname, '..'))})(process.argv[1], { readOnly: true })
      store.readFile(${JSON.stringify(FILES[0][0])}).then(() => {
        const shadows = require('node:fs').readdirSync(process.env.TMPDIR)
        process.stdout.write(String(shadows.length))
        process.exit(0) // without close()
      })`
    const made = execFileSync(process.execPath, ['-e', script, dir], { env: { ...process.env, TMPDIR: sh.dir }, encoding: 'utf8' })
    expect(Number(made)).to.be.above(0)
    expect(fs.readdirSync(sh.dir)).to.deep.equal([])
  })

  it('the shadows of a process ended by SIGTERM are removed by the next read-only open; a live process\'s stay', async () => {
    const dir = path.join(t.dir, 'store')
    await writeStore(dir)
    // Reads every file, says so, and waits: a library installs no signal handler.
    const script = `
      const store = require(${JSON.stringify(path.join(__dirname, '..'))})(process.argv[1], { readOnly: true })
      Promise.all(${JSON.stringify(FILES.map(([key]) => key))}.map((key) => store.readFile(key))).then(() => {
        process.stdout.write('read\\n')
        setInterval(() => {}, 1000)
      })`
    const reader = async () => {
      const child = spawn(process.execPath, ['-e', script, dir], { env: { ...process.env, TMPDIR: sh.dir }, stdio: ['ignore', 'pipe', 'inherit'] })
      const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve(signal)))
      await new Promise((resolve) => child.stdout.once('data', resolve))
      return { child, exited }
    }
    const live = await reader()
    try {
      const ofLive = fs.readdirSync(sh.dir).sort()
      expect(ofLive.length).to.be.above(1) // the state and the shards read
      for (const name of ofLive) expect(name).to.match(new RegExp(`^kfs-readonly-${live.child.pid}-\\d+-\\d+-${boot}-`))
      const killed = await reader()
      killed.child.kill('SIGTERM')
      expect(await killed.exited).to.equal('SIGTERM')
      expect(fs.readdirSync(sh.dir).length).to.be.above(ofLive.length) // left behind
      // One of another process with this pid, started at another time (a pid used
      // again): gone. One of another pid namespace (a container's), whose pids cannot
      // be checked, one of another boot or host (a temporary directory on NFS), and a
      // name of another form: kept.
      fs.mkdirSync(path.join(sh.dir, `kfs-readonly-${process.pid}-1-${ns}-${boot}-AbCdEf`), { mode: 0o700 })
      const otherBoot = (parseInt(boot, 16) ^ 1).toString(16).padStart(8, '0')
      const kept = [`kfs-readonly-${killed.child.pid}-1-${Number(ns) + 1}-${boot}-AbCdEf`, `kfs-readonly-${killed.child.pid}-1-${ns}-${otherBoot}-AbCdEf`, 'kfs-readonly-AbCdEf']
      for (const name of kept) fs.mkdirSync(path.join(sh.dir, name), { mode: 0o700 })

      const store = open(dir, { readOnly: true })
      expect(sha256(await store.readFile(FILES[0][0]))).to.equal(sha256(FILES[0][1]))
      await store.close()
      expect(fs.readdirSync(sh.dir).sort()).to.deep.equal([...ofLive, ...kept].sort())
    } finally {
      live.child.kill('SIGKILL')
      await live.exited
    }
  })

  it('the sweep removes only directories of its own user that nobody else can change: not a link, nor another user\'s', async function () {
    const dir = path.join(t.dir, 'store')
    await writeStore(dir)
    const dead = spawnSync(process.execPath, ['-e', '']).pid // gone: its shadows are stale
    const stale = (suffix) => path.join(sh.dir, `kfs-readonly-${dead}-1-${ns}-${boot}-${suffix}`)
    const victim = path.join(t.dir, 'victim')
    fs.mkdirSync(victim)
    fs.writeFileSync(path.join(victim, 'precious'), 'x')
    fs.symlinkSync(victim, stale('link'))
    fs.mkdirSync(stale('open'), { mode: 0o755 }) // another user could have made it theirs: kept
    fs.chmodSync(stale('open'), 0o755)
    fs.mkdirSync(stale('own'), { mode: 0o700 })
    fs.writeFileSync(path.join(stale('own'), 'f'), 'x')
    const kept = ['link', 'open']
    if (process.geteuid() === 0) {
      fs.mkdirSync(stale('nobody'), { mode: 0o700 })
      fs.writeFileSync(path.join(stale('nobody'), 'f'), 'x')
      fs.chownSync(stale('nobody'), 65534, 65534)
      kept.push('nobody')
    } else {
      console.log('      not checked: another user\'s directory (needs root to make one)')
    }
    const store = open(dir, { readOnly: true })
    expect(sha256(await store.readFile(FILES[0][0]))).to.equal(sha256(FILES[0][1]))
    await store.close()
    expect(fs.readdirSync(sh.dir).sort()).to.deep.equal(kept.map((suffix) => path.basename(stale(suffix))).sort())
    expect(fs.readdirSync(victim)).to.deep.equal(['precious'])
    if (kept.includes('nobody')) expect(fs.readdirSync(stale('nobody'))).to.deep.equal(['f'])
  })

  it('kfs --read-only reads a store it could write, changing nothing; put, unlink and compact fail with EROFS, exit 1', async () => {
    const dir = path.join(t.dir, 'store')
    await writeStore(dir)
    const before = tree(dir)
    await pause()
    const [key, data] = FILES[5]
    expect(cli(dir, ['--read-only', 'get', key]).stdout).to.deep.equal(data)
    const list = cli(dir, ['--read-only', 'list'])
    expect(list.code, list.stderr).to.equal(0)
    expect(list.stdout.toString().trim().split('\n')).to.have.length(FILES.length)
    expect(cli(dir, ['--read-only', 'verify']).code).to.equal(0)
    for (const args of [['put'], ['unlink', key], ['compact']]) {
      const r = cli(dir, ['--read-only', ...args], { input: Buffer.from('new data') })
      expect(r.code).to.equal(1)
      expect(r.stderr).to.equal(`kfs: the store at ${dir} is opened with --read-only: kfs ${args[0]} would change it; get, exists, stat, list and verify read it\n`)
    }
    expect(tree(dir)).to.deep.equal(before)
    expect(fs.readdirSync(sh.dir)).to.deep.equal([])
  })

  it('refuses every write with EROFS, after checking its arguments, and writes nothing', async () => {
    const dir = path.join(t.dir, 'store')
    await writeStore(dir)
    const before = tree(dir)
    await pause()
    const store = t.open({ readOnly: true })
    const refused = [
      () => store.writeFile('new', 'data'),
      () => store.writeFile(FILES[0][0], 'data'),
      () => store.put('data'),
      () => store.put(Readable.from([Buffer.from('data')])),
      () => pipeline(Readable.from([Buffer.from('data')]), store.createWriteStream('new')),
      () => store.unlink(FILES[3][0]),
      () => store.reclaim(),
      () => store.compact(),
      () => store.repair(0)
    ]
    for (const write of refused) {
      const err = await rejects(write, 'EROFS')
      expect(err.message).to.equal(`the store at ${dir} is open read-only: writes are refused`)
      expect(err.path).to.equal(dir)
    }
    await rejects(store.writeFile('', 'data'), 'EINVAL')
    await rejects(store.repair(256), 'EINVAL')
    await readsEverything(store)
    await store.close()
    expect(tree(dir)).to.deep.equal(before)
  })

  it('replays the logs of a store not closed cleanly in its sh.dir, leaving them in the store', async () => {
    const dir = path.join(t.dir, 'store')
    writeAndCrash(dir)
    const logs = fs.readdirSync(dir).filter((d) => /^\d{3}\.s$/.test(d)).flatMap((d) => fs.readdirSync(path.join(dir, d)).filter((f) => f.endsWith('.log')).map((f) => path.join(dir, d, f)))
    expect(logs.some((log) => fs.statSync(log).size > 0), 'a shard log holds writes').to.equal(true)
    const before = tree(dir)
    await pause()
    const store = open(dir, { readOnly: true })
    await readsEverything(store)
    await store.close()
    expect(tree(dir)).to.deep.equal(before)
    expect(fs.readdirSync(sh.dir)).to.deep.equal([])
    await readsEverything(t.open()) // and the store opens read-write as it would have
  })

  it('keeps a format 1 store at format 1 and reads it', async () => {
    const dir = path.join(t.dir, 'store')
    await writeStore(dir)
    await toFormat1(dir)
    const before = tree(dir)
    await pause()
    const store = t.open({ readOnly: true })
    await readsEverything(store)
    await store.close()
    expect(tree(dir)).to.deep.equal(before)
    expect(JSON.parse(fs.readFileSync(path.join(dir, 'format.json'), 'utf8')).format).to.equal(1)
  })

  it('is EBUSY while another store instance has the store (share: false), and keeps a read-write open out meanwhile', async () => {
    const dir = path.join(t.dir, 'store')
    await writeStore(dir)
    const writer = t.open({ share: false })
    await writer.open()
    const err = await rejects(open(dir, { readOnly: true }).open(), 'EBUSY')
    expect(err.message).to.contain(dir)
    await writer.close()
    const reader = t.open({ readOnly: true })
    await reader.readFile(FILES[3][0])
    await rejects(open(dir).open(), 'EBUSY')
    await reader.close()
    expect(fs.readdirSync(sh.dir)).to.deep.equal([])
  })

  it('a missing store is ENOENT, and nothing is created', async () => {
    const dir = path.join(t.dir, 'nothing')
    const err = await rejects(open(dir, { readOnly: true }).readFile('a'), 'ENOENT')
    expect(err.path).to.equal(dir)
    expect(fs.existsSync(dir)).to.equal(false)
    expect(fs.readdirSync(sh.dir)).to.deep.equal([])
  })

  it('removes the shadow of a shard that fails to open', async () => {
    const dir = path.join(t.dir, 'store')
    await writeStore(dir)
    const key = FILES[3][0]
    const store = t.open({ readOnly: true })
    const shardDir = path.join(dir, `${String((await store.stat(key)).shard).padStart(3, '0')}.s`)
    await store.close()
    for (const table of fs.readdirSync(shardDir).filter((f) => f.endsWith('.ldb'))) fs.rmSync(path.join(shardDir, table))
    const again = t.open({ readOnly: true })
    await rejects(again.readFile(key), 'ECORRUPT')
    expect(fs.readdirSync(sh.dir).length).to.equal(1) // the state's
    await again.close()
    expect(fs.readdirSync(sh.dir)).to.deep.equal([])
  })

  it('keeps LevelDB from compacting into the shadow while it reads', async () => {
    // One shard holding three tables, each of keys all over the range: reading the
    // oldest files makes LevelDB search the newer tables first, which starts a
    // compaction once a table was searched in vain often enough.
    const dir = path.join(t.dir, 'store')
    for (let round = 0; round < 3; round++) {
      const store = kfs(dir, { shardCount: 1 })
      for (let i = 0; i < 40; i++) await store.writeFile(`round ${round} file ${i}`, bytes(1000, `${round} ${i}`))
      await store.close()
    }
    const store = t.open({ readOnly: true })
    for (let pass = 0; pass < 3; pass++) {
      for (let i = 0; i < 40; i++) expect(sha256(await store.readFile(`round 0 file ${i}`))).to.equal(sha256(bytes(1000, `0 ${i}`)))
    }
    await sleep(200) // a compaction runs in the background
    const shard = path.join(sh.dir, fs.readdirSync(sh.dir).find((d) => fs.existsSync(path.join(sh.dir, d, '000.s'))), '000.s')
    const log = fs.readFileSync(path.join(shard, 'LOG'), 'utf8')
    expect(log, 'LevelDB tried to compact').to.match(/Compacting /)
    const tables = fs.readdirSync(shard).filter((f) => f.endsWith('.ldb') && fs.lstatSync(path.join(shard, f)).isFile())
    expect(tables, 'tables written in the shadow').to.deep.equal([])
  })

  it('a read-write open refused for want of write access says to open read-only (EPERM, EACCES, EROFS)', () => {
    for (const [text, code] of [['Operation not permitted', 'EPERM'], ['Permission denied', 'EACCES'], ['Read-only file system', 'EROFS']]) {
      const failed = classifyOpenError(new Error(`IO error: /x/state/LOCK: ${text}`))
      const err = openFailure(failed, { dir: '/x', what: 'the store at /x', damaged: 'the store state', props: { path: '/x' } })
      expect(err.code).to.equal(code)
      expect(err.message).to.equal(`the store at /x could not be opened: IO error: /x/state/LOCK: ${text}; a store that cannot be written opens for reads with the option readOnly: true`)
      // A read-only open that fails so (a shadow that cannot be made) has nothing to add.
      expect(openFailure(Object.assign(failed, { readOnly: true }), { dir: '/x', what: 'the store at /x' }).message).to.not.contain('readOnly')
    }
  })
})

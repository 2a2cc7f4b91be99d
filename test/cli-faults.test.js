'use strict'

// The command line under faults and odd input (issue "Correct under every fault",
// item 7, and the CLI part of item 5).
const { expect } = require('chai')
const fs = require('node:fs')
const path = require('node:path')
const { spawn, spawnSync } = require('node:child_process')
const { EventEmitter } = require('node:events')
const { Output } = require('../lib/cli/output')
const { bytes, sha256, scaled } = require('./helpers')
const { useCli, BIN } = require('./cli-harness')

describe('kfs command line under faults', function () {
  this.timeout(scaled(60000))
  const c = useCli()
  const { t, cli } = c

  // Runs a bash command in which $KFS is kfs on the test's store, for redirections.
  function shell (command) {
    const r = spawnSync('bash', ['-c', command], { env: { ...process.env, KFS: `${process.execPath} ${BIN} -d ${c.db}` }, encoding: 'utf8' })
    return { code: r.status, stdout: r.stdout, stderr: r.stderr }
  }

  const oneLine = (stderr) => expect(stderr, stderr).to.match(/^kfs: [^\n]+\n$/)

  // Waits until `done()` holds, for at most 20 s, scaled (a loaded machine is slow to
  // start a process).
  async function until (done, what) {
    for (const deadline = Date.now() + scaled(20000); !done();) {
      if (Date.now() > deadline) throw new Error(`not within ${scaled(20000)} ms: ${what}`)
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
  }

  // Whether one of process `pid`'s threads waits in a kernel function matching `pattern`
  // (/proc/PID/task/TID/wchan): wait_for_partner is a FIFO's open waiting for the other
  // end, pipe_write a write to a full pipe.
  function waitsIn (pid, pattern) {
    try {
      return fs.readdirSync(`/proc/${pid}/task`).some((tid) => pattern.test(fs.readFileSync(`/proc/${pid}/task/${tid}/wchan`, 'utf8')))
    } catch {
      return false // gone, or no /proc
    }
  }

  it('unlink and put succeed when giving the space back afterwards fails: a warning line, exit 0', async () => {
    const commands = require('../lib/cli/commands')
    const errors = require('../lib/api/errors')
    let err = ''
    const io = { stdout: new (require('node:stream').PassThrough)(), stderr: { write: (text, cb) => { err += text; if (cb) cb(); return true }, on () {}, off () {}, removeListener () {} } }
    const store = {
      heldBy: process.pid,
      unlink: async () => {},
      reclaim: async () => { throw errors.diskFull('shard 000', 'No space left on device') }
    }
    expect(await commands.unlink(store, io, 'k')).to.equal(0)
    expect(err).to.match(/^kfs: warning: the disk space of what was removed is not given back yet \(the disk is full \(shard 000\)[^\n]*\); a later command or kfs compact gives it back\n$/)
    // Used through another process, which gives the space back itself: not asked.
    err = ''
    store.heldBy = process.pid + 1
    expect(await commands.unlink(store, io, 'k')).to.equal(0)
    expect(err).to.equal('')
  })

  it('get of a key whose shard exists but that is gone: one line, exit 1, no crash', async () => {
    await cli(['put', '--key', 'a'], { input: 'x' })
    await cli(['unlink', 'a'])
    const r = await cli(['get', 'a'])
    expect(r.code).to.equal(1)
    oneLine(r.stderr)
    expect(r.stderr).to.match(/^kfs: no file named "a" \(key /)
  })

  it('get --start past the end of the file is a usage error: exit 2, one line', async () => {
    await cli(['put', '--key', 'b'], { input: 'hello' })
    const r = await cli(['get', 'b', '--start', '100'])
    expect(r.code).to.equal(2)
    oneLine(r.stderr)
    expect(r.stderr).to.contain('beyond the end')
    const huge = await cli(['get', 'b', '--start', '9007199254740992'])
    expect(huge.code).to.equal(2)
    oneLine(huge.stderr)
    expect(huge.stderr).to.contain('must be at most 9007199254740991')
  })

  it('put FILE replaces other bytes stored under its SHA-256 key with --key', async () => {
    const data = bytes(1000, 'true content')
    const key = sha256(data)
    await cli(['put', '--key', key], { input: 'impostor' })
    const src = path.join(t.dir, 'in')
    fs.writeFileSync(src, data)
    const r = await cli(['put', src])
    expect(r).to.include({ code: 0, stderr: '' })
    expect(r.stdout.toString()).to.equal(key + '\n')
    expect((await cli(['get', key])).stdout.equals(data)).to.equal(true)
  })

  for (const command of ['get K', 'list', 'put --allow-empty']) {
    it(`${command} > /dev/full: one kfs: line and exit 1, no stack trace`, async () => {
      await cli(['put', '--key', 'K'], { input: 'some bytes' })
      const r = shell(`$KFS ${command} < /dev/null > /dev/full`)
      expect(r.code, r.stderr).to.equal(1)
      oneLine(r.stderr)
      expect(r.stderr).to.contain('no space left on device')
    })
  }

  it('Ctrl-C during get FILE leaves no hidden partial file and no target', async () => {
    await cli(['put', '--key', 'big'], { input: bytes(64 * 1024 * 1024, 'big') })
    const target = path.join(t.dir, 'out.bin')
    const child = spawn(process.execPath, [BIN, '-d', c.db, 'get', 'big', target], { stdio: 'ignore' })
    const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })))
    const partial = () => fs.readdirSync(t.dir).filter((f) => f.startsWith('.out.bin.kfs-'))
    for (const deadline = Date.now() + scaled(20000); partial().length === 0 && Date.now() < deadline;) await new Promise((resolve) => setTimeout(resolve, 2))
    expect(partial(), 'the temporary file appeared').to.have.length(1)
    child.kill('SIGINT')
    expect(await exited).to.deep.equal({ code: null, signal: 'SIGINT' }) // a shell shows 130
    expect(partial()).to.deep.equal([])
    expect(fs.existsSync(target)).to.equal(false)
  })

  describe('a FIFO', () => {
    let fifo
    beforeEach(function () {
      fifo = path.join(t.dir, 'fifo')
      const made = spawnSync('mkfifo', [fifo])
      if (made.error || made.status !== 0) {
        console.log('      skipped: mkfifo is not available')
        this.skip()
      }
    })

    it('put FIFO reads it once and stores what was written to it', async () => {
      await cli(['put', '--key', 'x'], { input: 'x' }) // the store exists
      const data = bytes(3 * 1024 * 1024, 'fifo')
      const writer = fs.promises.writeFile(fifo, data) // opens once kfs opens it for reading
      const child = spawn(process.execPath, [BIN, '-d', c.db, 'put', fifo], { stdio: ['ignore', 'pipe', 'pipe'] })
      const out = []
      child.stdout.on('data', (d) => out.push(d))
      const timer = setTimeout(() => child.kill('SIGKILL'), scaled(30000)) // read twice, it would wait for a second writer for ever
      const [code, signal] = await new Promise((resolve) => child.on('close', (...r) => resolve(r)))
      clearTimeout(timer)
      await writer
      expect({ code, signal }).to.deep.equal({ code: 0, signal: null })
      expect(Buffer.concat(out).toString()).to.equal(sha256(data) + '\n')
      expect(sha256((await cli(['get', sha256(data)])).stdout)).to.equal(sha256(data))
    })

    // What kfs's handler adds to the signal's default action: the read-only store's
    // shadows are removed (and the files being written beside their target, and a
    // progress bar cleared: tests above and in cli-progress). It raises the signal again
    // rather than calling process.exit(), which would wait for the thread blocked in
    // open(2) or write(2) for ever: each command here waits there, for a writer, for a
    // reader (with the store not open yet), or for a reader that opened the FIFO but
    // reads nothing (with the store open, through shadows).
    const cases = [
      ['SIGINT', ['put'], 'a put waiting to open a FIFO nobody writes', /wait_for_partner/],
      ['SIGINT', ['--read-only', 'get', 'x'], 'a --read-only get waiting to open a FIFO nobody reads', /wait_for_partner/],
      ['SIGTERM', ['--read-only', 'get', 'big'], 'a --read-only get writing to a FIFO whose reader reads nothing', /pipe_write/],
      ['SIGHUP', ['--read-only', 'get', 'big'], 'a --read-only get writing to a FIFO whose reader reads nothing', /pipe_write/]
    ]
    for (const [signal, args, what, blocked] of cases) {
      const opened = args.includes('big')
      it(`${signal} ends ${what} at once, by that signal${opened ? ', leaving no shadow' : ''}`, async () => {
        await cli(['put', '--key', 'x'], { input: 'x' }) // the store exists
        if (opened) await cli(['put', '--key', 'big'], { input: bytes(1024 * 1024, 'big') }) // more than a pipe holds
        const tmp = path.join(t.dir, 'tmp')
        fs.mkdirSync(tmp)
        // Opened without waiting for a writer, and never read: a reader that reads nothing.
        const reader = opened ? fs.openSync(fifo, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK) : undefined
        try {
          const child = spawn(process.execPath, [BIN, '-d', c.db, ...args, fifo], { stdio: 'ignore', env: { ...process.env, TMPDIR: tmp } })
          const exited = new Promise((resolve) => child.on('exit', (code, sig) => resolve({ code, signal: sig })))
          await until(() => waitsIn(child.pid, blocked), `kfs blocked in ${blocked.source}`)
          if (opened) expect(fs.readdirSync(tmp), 'the store is open, through shadows').to.not.deep.equal([])
          const sent = Date.now()
          child.kill(signal)
          let timer
          // Without the handler's raise, it would wait for ever: any bound proves it.
          const outcome = await Promise.race([exited, new Promise((resolve) => { timer = setTimeout(() => resolve('still running'), scaled(10000)) })])
          clearTimeout(timer)
          if (outcome === 'still running') child.kill('SIGKILL')
          expect(outcome).to.deep.equal({ code: null, signal })
          expect(Date.now() - sent).to.be.below(scaled(10000))
          expect(fs.readdirSync(tmp)).to.deep.equal([])
        } finally {
          if (reader !== undefined) fs.closeSync(reader)
        }
      })
    }

    it('get KEY FIFO waiting for a reader leaves the store free: another kfs reads it meanwhile', async () => {
      await cli(['put', '--key', 'x'], { input: 'the bytes' })
      const child = spawn(process.execPath, [BIN, '-d', c.db, 'get', 'x', fifo], { stdio: 'ignore' })
      const exited = new Promise((resolve) => child.on('exit', resolve))
      try {
        await until(() => waitsIn(child.pid, /wait_for_partner/), 'kfs get waiting for a reader of the FIFO')
        const r = await cli(['get', 'x'])
        expect(r).to.deep.include({ code: 0, stderr: '' })
        expect(r.stdout.toString()).to.equal('the bytes')
        // Then a reader comes, and gets the file.
        const read = fs.promises.readFile(fifo, 'utf8')
        expect(await exited).to.equal(0)
        expect(await read).to.equal('the bytes')
      } finally {
        child.kill('SIGKILL')
      }
    })
  })

  it('put from a directory on stdin, or of a directory, fails instead of storing an empty file', async () => {
    await cli(['put', '--key', 'x'], { input: 'x' }) // the store exists
    const fromStdin = await cli(['put'], { stdin: fs.openSync('/', 'r') })
    expect(fromStdin.code).to.equal(1)
    oneLine(fromStdin.stderr)
    expect(fromStdin.stderr).to.contain('directory')
    const ofDir = await cli(['put', t.dir])
    expect(ofDir.code).to.equal(1)
    expect(ofDir.stderr).to.equal(`kfs: ${t.dir} is a directory, not a file\n`)
    const empty = sha256(Buffer.alloc(0))
    expect((await cli(['exists', empty])).stdout.toString()).to.equal('false\n')
  })

  it('list prints every file of the readable shards before naming the damaged ones; list N of a sound shard says nothing of them', async () => {
    const kfs = require('..')
    const { keyInShard, REF } = require('./helpers')
    const store = kfs(c.db, { referenceId: REF })
    const keys = [1, 2, 3, 4, 5].map((shard) => keyInShard(REF, shard, 'cli list'))
    for (const key of keys) await store.writeFile(key, 'x')
    await store.close()
    const shardDir = (n) => path.join(c.db, `00${n}.s`)
    for (const f of fs.readdirSync(shardDir(2)).filter((f) => f.endsWith('.ldb'))) fs.rmSync(path.join(shardDir(2), f)) // a table lost
    for (const f of fs.readdirSync(shardDir(4)).filter((f) => f.startsWith('MANIFEST'))) fs.rmSync(path.join(shardDir(4), f))
    const all = await cli(['list'])
    expect(all.code).to.equal(1)
    expect(all.stdout.toString().split('\n').filter(Boolean).map((l) => l.split('\t')[0]).sort()).to.deep.equal([keys[0], keys[2], keys[4]].sort())
    oneLine(all.stderr)
    expect(all.stderr).to.match(/^kfs: shards 002, 004 are corrupt: .*the other shards were listed\n$/)
    const one = await cli(['list', '3'])
    expect(one).to.include({ code: 0, stderr: '' })
    expect(one.stdout.toString()).to.equal(`${keys[2]}\t1\t\n`)
    const damaged = await cli(['list', '4'])
    expect(damaged.code).to.equal(1)
    expect(damaged.stderr).to.match(/^kfs: shard 004 is corrupt: /)
    expect(damaged.stderr).to.not.contain('other shards')
  })

  it('list escapes tabs, newlines, backslashes and control characters in names', async () => {
    const name = 'a\tb\nc\\d\re\x01f'
    await cli(['put', '--key', name], { input: 'x' })
    const lines = (await cli(['list'])).stdout.toString().split('\n').filter(Boolean)
    expect(lines).to.have.length(1)
    expect(lines[0].split('\t')).to.have.length(3)
    expect(lines[0].split('\t')[2]).to.equal('a\\tb\\nc\\\\d\\re\\x01f')
  })

  describe('get FILE where FILE is not a plain file', () => {
    const data = bytes(300 * 1024, 'target')
    beforeEach(async () => {
      await cli(['put', '--key', 'k'], { input: data })
    })

    it('a FIFO is written through to the process reading it, and stays a FIFO', async function () {
      const fifo = path.join(t.dir, 'fifo')
      if (spawnSync('mkfifo', [fifo]).status !== 0) return this.skip()
      const reader = spawn('cat', [fifo], { stdio: ['ignore', 'pipe', 'inherit'] })
      const got = []
      reader.stdout.on('data', (d) => got.push(d))
      const read = new Promise((resolve) => reader.on('close', resolve))
      try {
        const r = await cli(['get', 'k', fifo])
        expect(r).to.deep.include({ code: 0, stderr: '' })
        expect(fs.lstatSync(fifo).isFIFO()).to.equal(true)
        await read
        expect(Buffer.concat(got).equals(data)).to.equal(true)
      } finally {
        reader.kill() // a FIFO renamed over leaves cat waiting for a writer for ever
      }
    })

    it('a symbolic link is followed: the link stays, the file it points to is replaced whole, with its mode', async () => {
      const real = path.join(t.dir, 'real')
      fs.writeFileSync(real, 'previous', { mode: 0o600 })
      const before = fs.statSync(real)
      const link = path.join(t.dir, 'link')
      fs.symlinkSync('real', link)
      const r = await cli(['get', 'k', link])
      expect(r).to.deep.include({ code: 0, stderr: '' })
      expect(fs.lstatSync(link).isSymbolicLink()).to.equal(true)
      expect(fs.readlinkSync(link)).to.equal('real')
      expect(fs.readFileSync(real).equals(data)).to.equal(true)
      const after = fs.statSync(real)
      expect(after.ino, 'replaced by a rename, not rewritten in place').to.not.equal(before.ino)
      expect(after.mode & 0o777).to.equal(0o600)
      expect(fs.readdirSync(t.dir).filter((f) => f.includes('.kfs-'))).to.deep.equal([])
    })

    it('a link to a pipe, as /dev/stdout may be, is written through', async () => {
      const link = path.join(t.dir, 'stdout')
      fs.symlinkSync('/proc/self/fd/1', link) // of the process that opens it: kfs
      const r = shell(`$KFS get k ${link} | sha256sum`) // a pipe: node's own stdio would be a socket
      expect(r).to.deep.equal({ code: 0, stdout: `${sha256(data)}  -\n`, stderr: '' })
      expect(fs.lstatSync(link).isSymbolicLink()).to.equal(true)
    })

    it('a file written through is closed by the command itself, not left to the garbage collector', async () => {
      // In process, as the command does it: close() ends once the bytes are written. The
      // write stream held a reference to the handle, and its close never ended.
      const { openTarget } = require('../lib/cli/write-file')
      const { pipeline } = require('node:stream/promises')
      const { Readable } = require('node:stream')
      const target = await openTarget('/dev/null')
      await target.write((out) => pipeline(Readable.from([data]), out))
      const closed = await Promise.race([target.close().then(() => true), new Promise((resolve) => setTimeout(resolve, scaled(10000), false))])
      expect(closed, 'close() ended').to.equal(true)
    })

    it('a regular file is still replaced by a rename: a hard link to it keeps the old bytes', async () => {
      const out = path.join(t.dir, 'out')
      fs.writeFileSync(out, 'previous', { mode: 0o640 })
      fs.linkSync(out, path.join(t.dir, 'old'))
      expect((await cli(['get', 'k', out])).code).to.equal(0)
      expect(fs.readFileSync(out).equals(data)).to.equal(true)
      expect(fs.statSync(out).mode & 0o777).to.equal(0o640)
      expect(fs.readFileSync(path.join(t.dir, 'old'), 'utf8')).to.equal('previous')
    })

    it('a FIFO or device swapped for a regular file between lstat and open is replaced whole, not written in place', async function () {
      const victim = path.join(t.dir, 'victim')
      if (spawnSync('mkfifo', [victim]).status !== 0) return this.skip()
      // Swaps it for a longer regular file as kfs opens it to write through.
      const swap = path.join(t.dir, 'swap.js')
      fs.writeFileSync(swap, `
        const fs = require('node:fs')
        const open = fs.promises.open
        let swapped = false
        fs.promises.open = function (file, flags, ...rest) {
          if (!swapped && file === ${JSON.stringify(victim)} && typeof flags === 'number' && (flags & fs.constants.O_WRONLY)) {
            swapped = true
            fs.rmSync(file)
            fs.writeFileSync(file, 'X'.repeat(${data.length + 100000}))
          }
          return open.call(this, file, flags, ...rest)
        }`)
      const r = spawnSync(process.execPath, ['--require', swap, BIN, '-d', c.db, 'get', 'k', victim], { encoding: 'utf8' })
      expect(r).to.deep.include({ status: 0, stderr: '' })
      expect(fs.lstatSync(victim).isFile()).to.equal(true)
      expect(sha256(fs.readFileSync(victim))).to.equal(sha256(data))
    })

    it('a socket is refused, saying what it is', async function () {
      const sock = path.join(t.dir, 'sock')
      const server = require('node:net').createServer()
      await new Promise((resolve) => server.listen(sock, resolve))
      try {
        const r = await cli(['get', 'k', sock])
        expect(r.code).to.equal(1)
        expect(r.stderr).to.equal(`kfs: ${sock} is a socket: kfs writes to files, devices and FIFOs\n`)
      } finally {
        server.close()
      }
    })

    it('a link to nothing is refused, as cp refuses it, and creates nothing', async () => {
      const link = path.join(t.dir, 'dangling')
      fs.symlinkSync('nowhere/file', link)
      const r = await cli(['get', 'k', link])
      expect(r.code).to.equal(1)
      expect(r.stderr).to.equal(`kfs: ${link} is a symbolic link to nowhere/file, which does not exist: not writing through it\n`)
      expect(fs.readdirSync(t.dir).sort()).to.deep.equal(['dangling', 'db'])
    })

    it('a directory is refused before anything is read', async () => {
      const dir = path.join(t.dir, 'somedir')
      fs.mkdirSync(dir)
      const r = await cli(['get', 'k', dir])
      expect(r.code).to.equal(1)
      expect(r.stderr).to.equal(`kfs: ${dir} is a directory: name the file to write\n`)
      expect(fs.readdirSync(t.dir).sort()).to.deep.equal(['db', 'somedir'])
    })
  })

  it('an error writing to a bad target names the target, not the temporary file', async () => {
    await cli(['put', '--key', 'k'], { input: 'x' })
    const target = path.join(t.dir, 'no-such-dir', 'out')
    const r = await cli(['get', 'k', target])
    expect(r.code).to.equal(1)
    expect(r.stderr).to.equal(`kfs: ${target}: no such file or directory\n`)
  })

  it('read-only commands on a path that holds no store fail with ENOENT naming it and create nothing', async () => {
    const missing = path.join(t.dir, 'not-there')
    for (const args of [['get', 'k'], ['stat'], ['list'], ['exists', 'k'], ['verify'], ['unlink', 'k'], ['compact'], ['repair', '1']]) {
      const r = spawnSync(process.execPath, [BIN, '-d', missing, ...args], { encoding: 'utf8' })
      expect(r.status, args.join(' ')).to.equal(1)
      expect(r.stderr, args.join(' ')).to.equal(`kfs: there is no kfs store at ${missing}: it does not exist\n`)
      expect(fs.existsSync(missing), args.join(' ')).to.equal(false)
    }
  })

  it('writing with backpressure leaves no listener behind', async () => {
    const stream = new EventEmitter()
    let calls = 0
    stream.write = (text, callback) => {
      calls++
      if (callback) setImmediate(callback)
      setImmediate(() => stream.emit('drain'))
      return false // always backpressured, like a slow reader
    }
    const out = new Output(stream)
    for (let i = 0; i < 100; i++) await out.write(`line ${i}\n`)
    await out.flush()
    expect(calls).to.equal(101)
    expect(stream.listenerCount('error')).to.equal(1)
    expect(stream.listenerCount('drain')).to.equal(0)
    out.close()
    expect(stream.listenerCount('error')).to.equal(0)
  })
})

'use strict'

// One store, many processes (lib/share/): the process that holds a store serves it on
// a Unix socket in its directory, and another kfs(dir) uses it through that socket.
const { expect } = require('chai')
const fs = require('node:fs')
const path = require('node:path')
const crypto = require('node:crypto')
const net = require('node:net')
const { once } = require('node:events')
const { spawn, spawnSync, execFile, execFileSync } = require('node:child_process')
const { promisify } = require('node:util')
const { Readable } = require('node:stream')
const { pipeline } = require('node:stream/promises')
const kfs = require('..')
const { useTmp, rejects, scaled, sleep, within } = require('./helpers')
const { holder, ROOT } = require('./share-harness')

// A Readable of `size` bytes of `data` repeated, in parts of `part` bytes, that waits
// for `gate` (a promise) before its part at `at` bytes.
function slowSource (data, { at, gate }) {
  let offset = 0
  return new Readable({
    async read () {
      if (offset === at) await gate
      const part = data.subarray(offset, Math.min(offset + 65536, offset === 0 ? at : data.length))
      offset += part.length
      this.push(part.length ? part : null)
    }
  })
}

describe('one store, many processes', function () {
  this.timeout(scaled(60000))
  const t = useTmp()

  it('another process uses every call through the holder, with the same results and error codes', async () => {
    const dir = path.join(t.dir, 'store')
    const held = await holder(dir, { openAhead: false }) // makes no shard ahead: one that does not exist is asked for below
    try {
      expect(fs.statSync(path.join(dir, 'kfs.sock')).isSocket()).to.equal(true)
      expect(fs.statSync(path.join(dir, 'kfs.sock')).mode & 0o777).to.equal(0o600)
      const store = kfs(dir)
      await store.writeFile('a', 'alpha')
      expect(String(await store.readFile('a'))).to.equal('alpha')
      expect(await store.exists('a')).to.equal(true)
      expect(await store.exists('nothing')).to.equal(false)
      const stat = await store.stat('a')
      expect(stat).to.include({ size: 5, name: 'a', sha256: crypto.createHash('sha256').update('alpha').digest('hex') })
      expect(stat.mtime).to.be.an.instanceOf(Date)
      const big = crypto.randomBytes(3 * 1024 * 1024 + 7)
      const key = await store.put(big)
      expect(key).to.equal(crypto.createHash('sha256').update(big).digest('hex'))
      expect(await store.put(Readable.from([big.subarray(0, 100)]))).to.equal(crypto.createHash('sha256').update(big.subarray(0, 100)).digest('hex'))
      expect((await store.readFile(key)).equals(big)).to.equal(true)
      const parts = []
      for await (const part of store.createReadStream(key, { start: 1000, end: 1999 })) parts.push(part)
      expect(Buffer.concat(parts).equals(big.subarray(1000, 2000))).to.equal(true)
      await pipeline(Readable.from([Buffer.from('stre'), Buffer.from('amed')]), store.createWriteStream('s', { size: 8 }))
      expect(String(await store.readFile('s'))).to.equal('streamed')
      // A write the holder refuses commits nothing, and its error crosses whole.
      const refused = await pipeline(Readable.from([Buffer.from('other')]), store.createWriteStream('s', { sha256: 'a'.repeat(64) })).then(() => undefined, (err) => err)
      expect(refused && refused.code).to.equal('EINTEGRITY')
      expect(String(await store.readFile('s'))).to.equal('streamed')
      const listed = []
      for await (const file of store.list()) listed.push(file.name || file.key)
      expect(listed.sort()).to.deep.equal([...new Set([key, crypto.createHash('sha256').update(big.subarray(0, 100)).digest('hex'), 'a', 's'])].sort())
      expect((await store.usage()).files).to.equal(4)
      expect(await store.diskUsage()).to.be.above(0)
      const progress = []
      expect((await store.verify({ onProgress: (p) => progress.push(p) })).problems).to.deep.equal([])
      expect(progress.length).to.be.above(0)
      await store.compact()
      await store.reclaim()
      await store.unlink('a')
      expect(await store.exists('a')).to.equal(false)
      const missing = await rejects(store.readFile('a'), 'ENOENT')
      expect(missing.key).to.equal(stat.key)
      await rejects(store.unlink('a'), 'ENOENT')
      await rejects(store.stat('a'), 'ENOENT')
      const held = new Set((await store.usage()).shards.map((s) => s.index))
      await rejects(store.repair([...Array(256).keys()].find((i) => !held.has(i))), 'ENOENT') // a shard that does not exist
      expect(await rejects(store.writeFile('', 'x'), 'EINVAL')).to.be.an.instanceOf(RangeError)
      await rejects(store.readFile('\ud800x'), 'EINVAL')
      // Checked by the holder: its error's class crosses too.
      expect(await rejects(store.createReadStream(key, { start: 10 ** 9 }).toArray(), 'EINVAL')).to.be.an.instanceOf(RangeError)
      expect(store.referenceId).to.match(/^[0-9a-f]{40}$/)
      expect(store.shardCount).to.equal(256)
      await store.close()
      const reader = kfs(dir, { readOnly: true })
      expect(String(await reader.readFile('s'))).to.equal('streamed')
      await rejects(reader.writeFile('x', 'y'), 'EROFS')
      await reader.close()
    } finally {
      await held.stop()
    }
    expect(fs.existsSync(path.join(dir, 'kfs.sock')), 'the socket removed at close').to.equal(false)
  })

  it('the command line works on a store a process holds; with share: false, it is EBUSY', async () => {
    const dir = path.join(t.dir, 'store')
    const cli = (args, input) => execFileSync(process.execPath, [path.join(ROOT, 'bin', 'kfs.js'), '-d', dir, ...args], { input, encoding: 'utf8', stdio: 'pipe' })
    let held = await holder(dir)
    try {
      expect(cli(['put', '--key', 'k'], 'via the holder').trim()).to.match(/^[0-9a-f]{40}$/)
      expect(cli(['get', 'k'])).to.equal('via the holder')
      expect(cli(['list'])).to.match(/\t14\tk\n$/)
      expect(cli(['--read-only', 'stat', 'k'])).to.match(/^key/)
    } finally {
      await held.stop()
    }
    held = await holder(dir, { share: false })
    try {
      expect(() => cli(['get', 'k'])).to.throw(/in use by process \d+, which does not share it/)
    } finally {
      await held.stop()
    }
  })

  it('names . and .., names of any characters across a long listing, a Readable that fails, and a client that leaves a verify: the holder goes on', async () => {
    const dir = path.join(t.dir, 'store')
    const held = await holder(dir)
    try {
      const store = kfs(dir)
      const names = ['.', '..', 'a/b?c#d%e', ...Array.from({ length: 300 }, (_, i) => `név-${i}-€-😀`)]
      for (const name of names) await store.writeFile(name, name)
      for (const name of names.slice(0, 4)) expect(String(await store.readFile(name))).to.equal(name)
      const listed = []
      for await (const file of store.list()) listed.push(file.name)
      expect(listed.sort()).to.deep.equal([...names].sort())
      const failing = new Readable({ read () { this.destroy(Object.assign(new Error('the source failed'), { code: 'ESOURCE' })) } })
      expect((await rejects(store.put(failing), 'ESOURCE')).message).to.equal('the source failed')
      const stopped = await store.verify({ onProgress: () => { throw Object.assign(new Error('enough'), { code: 'ESTOP' }) } }).then(() => undefined, (err) => err)
      expect(stopped && stopped.code).to.equal('ESTOP')
      expect((await store.usage()).files).to.equal(names.length)
      await store.close()
    } finally {
      await held.stop()
    }
  })

  it('with share: false, no socket is made; a holder exits while a client is connected', async () => {
    const dir = path.join(t.dir, 'store')
    const alone = kfs(dir, { share: false })
    await alone.open()
    expect(fs.readdirSync(dir)).to.not.include('kfs.sock')
    await alone.close()
    // A holder that never closes its store exits when its work is done, a client connected.
    const script = `require('./')(process.argv[1]).writeFile('a', 'b').then(() => { console.log('holding'); setTimeout(() => {}, 300) })`
    const child = spawn(process.execPath, ['-e', script, dir], { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] })
    await once(child.stdout, 'data')
    const connected = net.connect(path.join(dir, 'kfs.sock'))
    await once(connected, 'connect')
    const [code] = await once(child, 'exit')
    expect(code).to.equal(0)
    connected.destroy()
  })

  it('a second store instance in the holding process uses it through the socket too', async () => {
    const first = t.open()
    await first.writeFile('a', 'b')
    const second = t.open()
    expect(String(await second.readFile('a'))).to.equal('b')
    await second.writeFile('c', 'd')
    expect(String(await first.readFile('c'))).to.equal('d')
    await second.close()
    await first.close()
  })

  it('when the holder is killed, the next call of a client takes the store, and serves it in turn', async () => {
    const dir = path.join(t.dir, 'store')
    const held = await holder(dir)
    const store = kfs(dir)
    await store.writeFile('a', 'alpha')
    expect(store.heldBy).to.equal(held.child.pid)
    await held.kill()
    expect(fs.existsSync(path.join(dir, 'kfs.sock')), 'a stale socket').to.equal(true)
    // Reads, content-addressed puts and whole writes are made again here.
    expect(String(await store.readFile('a'))).to.equal('alpha')
    expect(store.heldBy).to.equal(process.pid)
    // Another process uses the store through this one.
    const { stdout } = await promisify(execFile)(process.execPath, [path.join(ROOT, 'bin', 'kfs.js'), '-d', dir, 'get', 'a'], { encoding: 'utf8' })
    expect(stdout).to.equal('alpha')
    await store.close()
  })

  it('a holder killed during a put stream, a get stream and a listing: each fails with ECONNRESET, nothing partial is stored, the next holder serves', async function () {
    const dir = path.join(t.dir, 'store')
    let held = await holder(dir)
    const big = crypto.randomBytes(4 * 1024 * 1024)
    const client = kfs(dir)
    await client.writeFile('old', 'the old version')
    await client.writeFile('big', big)
    // A listing longer than what the socket and the client's buffers hold (600 KB of names).
    const long = 'n'.repeat(300)
    for (let i = 0; i < 2000; i += 100) await Promise.all(Array.from({ length: 100 }, (_, j) => client.writeFile(`${long}${i + j}`, String(i + j))))

    // A put stream: the holder dies with half the body sent.
    let release
    const gate = new Promise((resolve) => { release = resolve })
    const writing = pipeline(slowSource(big, { at: 2 * 1024 * 1024, gate }), client.createWriteStream('old')).then(() => undefined, (err) => err)
    await sleep(300) // the body is being sent
    await held.kill()
    release()
    expect((await writing).code).to.equal('ECONNRESET')
    held = await holder(dir)
    const reader = kfs(dir)
    expect(String(await reader.readFile('old')), 'the previous version, whole').to.equal('the old version')

    // A get stream: the bytes read are the file's first bytes, then ECONNRESET.
    const stream = client.createReadStream('big')
    const got = []
    let failure
    try {
      for await (const part of stream) {
        got.push(part)
        if (got.length === 1) await held.kill()
      }
    } catch (err) {
      failure = err
    }
    expect(failure && failure.code).to.equal('ECONNRESET')
    const read = Buffer.concat(got)
    expect(read.length).to.be.below(big.length)
    expect(read.equals(big.subarray(0, read.length))).to.equal(true)

    // A listing: the next call takes the store (this process), and lists it whole.
    held = await holder(dir)
    const names = []
    const listing = (async () => {
      for await (const file of client.list()) {
        names.push(file.name)
        if (names.length === 1) await held.kill()
        await new Promise((resolve) => setImmediate(resolve))
      }
    })()
    const listed = await listing.then(() => undefined, (err) => err)
    expect(listed && listed.code).to.equal('ECONNRESET')
    expect(names.length).to.be.below(2002)
    const all = []
    for await (const file of client.list()) all.push(file.name)
    expect(all.length).to.equal(2002)
    expect(client.heldBy).to.equal(process.pid)
    expect((await client.verify()).problems).to.deep.equal([])
    expect((await client.readFile('big')).equals(big)).to.equal(true)
    await reader.close()
    await client.close()
  })

  it('a client asking for sync gets synced writes from a holder without it', async () => {
    const { LevelDb } = require('../lib/leveldb/leveldb')
    const batch = LevelDb.prototype.batch
    const synced = []
    LevelDb.prototype.batch = function (ops, options) {
      if (/\d{3}\.s$/.test(this.location)) synced.push(Boolean(options && options.sync)) // a shard's
      return batch.call(this, ops, options)
    }
    try {
      const dir = path.join(t.dir, 'store')
      const held = kfs(dir)
      await held.writeFile('warm', 'up')
      const client = kfs(dir, { sync: true })
      const plain = kfs(dir)
      const cases = [
        ['writeFile', (s) => s.writeFile('a', 'alpha')],
        ['a large stream', (s) => pipeline(Readable.from([crypto.randomBytes(3 * 1024 * 1024)]), s.createWriteStream('b'))],
        ['put', (s) => s.put('content')],
        ['unlink', (s) => s.unlink('a')]
      ]
      for (const [name, write] of cases) {
        await held.writeFile('a', 'alpha') // for unlink
        synced.length = 0
        await write(plain)
        await held.writeFile('a', 'alpha')
        expect(synced, `${name} from a client without sync`).to.not.include(true)
        synced.length = 0
        await write(client)
        expect(synced, `${name} from a client with sync`).to.not.include(false)
        expect(synced.length, name).to.be.above(0)
      }
      await plain.close()
      await client.close()
      await held.close()
    } finally {
      LevelDb.prototype.batch = batch
    }
  })

  it('a client that never reads an answer, or stops sending a body, is cut off and holds nothing', async () => {
    const { Holder } = require('../lib/share/server')
    const dir = path.join(t.dir, 'store')
    const store = kfs(dir, { share: false })
    await store.writeFile('big', crypto.randomBytes(16 * 1024 * 1024))
    const holding = new Holder(store, dir, { idleMs: 300 })
    expect(await holding.listen(path.join(dir, 'tmp'))).to.equal(true)
    // Resolves to what the holder sent, read once the client was idle for long enough.
    const ask = async (request) => {
      const socket = net.connect(path.join(dir, 'kfs.sock'))
      socket.pause()
      socket.write(request)
      await sleep(2000) // far past the holder's idleMs (300)
      const parts = []
      socket.on('data', (part) => parts.push(part)).on('error', () => {})
      socket.resume()
      await once(socket, 'close')
      return Buffer.concat(parts).toString('latin1')
    }
    const [got, put] = await Promise.all([
      ask('GET /v1/files/big HTTP/1.1\r\nHost: kfs\r\n\r\n'),
      ask('PUT /v1/files/half HTTP/1.1\r\nHost: kfs\r\nContent-Length: 1000000\r\n\r\n' + 'x'.repeat(1000))
    ])
    expect(got).to.match(/^HTTP\/1.1 200/)
    expect(got.length, 'the answer was cut').to.be.below(16 * 1024 * 1024)
    expect(put, 'no answer to a body never finished').to.equal('')
    expect(await store.exists('half')).to.equal(false)
    await holding.close()
    // Nothing left held: close() does not wait for a read or a write.
    await store.close()
  })

  it('three processes write and read through one holder at once', async () => {
    const dir = path.join(t.dir, 'store')
    const held = await holder(dir)
    try {
      // Each client writes 40 files under its prefix, reads them back, and prints the holder's pid.
      const script = `
        const store = require('./')(process.argv[1])
        const prefix = process.argv[2]
        ;(async () => {
          await Promise.all(Array.from({ length: 40 }, (_, i) => store.writeFile(prefix + i, prefix.repeat(i + 1))))
          for (let i = 0; i < 40; i++) if (String(await store.readFile(prefix + i)) !== prefix.repeat(i + 1)) throw new Error('other bytes')
          console.log(store.heldBy)
          await store.close()
        })().catch((err) => { console.error(err); process.exit(1) })`
      const run = (prefix) => promisify(execFile)(process.execPath, ['-e', script, dir, prefix], { cwd: ROOT, encoding: 'utf8' })
      const here = kfs(dir)
      const [b, c] = await Promise.all([run('b'), run('c'), Promise.all(Array.from({ length: 40 }, (_, i) => here.writeFile(`d${i}`, 'd')))])
      expect([Number(b.stdout), Number(c.stdout), here.heldBy]).to.deep.equal([held.child.pid, held.child.pid, held.child.pid])
      let files = 0
      for await (const file of here.list()) files += file.name.length > 0 ? 1 : 0
      expect(files).to.equal(120)
      expect(String(await here.readFile('c39'))).to.equal('c'.repeat(40))
      await here.close()
    } finally {
      await held.stop()
    }
  })

  it('a client that finds the store held leaves the holder\'s LevelDB alone: its info LOG is not replaced', async () => {
    const dir = path.join(t.dir, 'store')
    const held = await holder(dir)
    try {
      const log = path.join(dir, 'state', 'LOG')
      const before = fs.statSync(log).ino
      for (let i = 0; i < 3; i++) await rejects(kfs(dir, { share: false }).open(), 'EBUSY')
      expect(fs.statSync(log).ino).to.equal(before)
    } finally {
      await held.stop()
    }
  })

  it('the holder killed while calls wait: close() settles, a write fails with ECONNRESET and is not made again, a source\'s own failure is the caller\'s', async () => {
    const dir = path.join(t.dir, 'store')
    const held = await holder(dir)
    const store = kfs(dir)
    await store.writeFile('a', 'alpha')
    // A Readable that fails with a system error of its own: the holder is not lost.
    expect((await rejects(store.put(fs.createReadStream(t.dir)), 'EISDIR')).code).to.equal('EISDIR')
    expect(store.heldBy).to.equal(held.child.pid)
    held.child.kill('SIGSTOP')
    const writing = store.writeFile('a', 'other').then(() => undefined, (err) => err)
    const waiting = store.exists('a').then(() => 'settled', (err) => err.code)
    await sleep(200) // the calls wait for the stopped holder
    const closed = store.close()
    await held.kill()
    expect((await writing).code).to.equal('ECONNRESET')
    expect(await waiting).to.be.oneOf(['settled', 'ECONNRESET', 'ECLOSED'])
    await closed
    expect(store.heldBy).to.equal(undefined)
    const after = kfs(dir)
    expect(String(await after.readFile('a'))).to.equal('alpha')
    await after.close()
  })

  it('six clients lose their holder at once: one takes the store, the others reach it, every call answers', async () => {
    const dir = path.join(t.dir, 'store')
    const held = await holder(dir)
    const seed = kfs(dir)
    await seed.writeFile('a', 'alpha')
    await seed.close()
    // Each client reads once through the holder, then again on a line from stdin, and
    // closes its store once stdin ends (so that whoever took the store serves the rest).
    const script = `
      const store = require('./')(process.argv[1])
      const read = () => store.readFile('a').then(String)
      read().then((first) => {
        console.log(first)
        process.stdin.once('data', () => read().then((again) => console.log(again + ' ' + store.heldBy), (err) => { console.log(err.code + ' ' + err.message); process.exitCode = 1 }))
        process.stdin.once('end', () => store.close())
      })`
    const clients = Array.from({ length: 6 }, () => spawn(process.execPath, ['-e', script, dir], { cwd: ROOT, stdio: ['pipe', 'pipe', 'inherit'] }))
    const lines = clients.map((child) => {
      const got = []
      let rest = ''
      child.stdout.on('data', (d) => {
        const parts = (rest + d).split('\n')
        rest = parts.pop()
        got.push(...parts)
      })
      return (n) => new Promise((resolve) => {
        const check = () => (got.length >= n ? resolve(got.slice()) : setTimeout(check, 20))
        check()
      })
    })
    await Promise.all(lines.map((wait) => wait(1)))
    await held.kill()
    for (const child of clients) child.stdin.write('go\n')
    const answers = await Promise.all(lines.map((wait) => wait(2)))
    const exits = clients.map((child) => once(child, 'exit'))
    for (const child of clients) child.stdin.end()
    await Promise.all(exits)
    const holders = new Set()
    for (const [first, again] of answers) {
      expect(first).to.equal('alpha')
      expect(again, again).to.match(/^alpha \d+$/)
      holders.add(again.split(' ')[1])
    }
    expect(holders.size, 'one holder for all').to.equal(1)
  })
})

// The holder's HTTP server (lib/share/server.js) against clients that misbehave: each
// sends what it is given on a raw connection.
describe('the holder\'s connections', function () {
  this.timeout(scaled(60000))
  const t = useTmp()
  const { Holder } = require('../lib/share/server')
  const opened = [] // connections and holders, ended after each test, even one that failed
  afterEach(async () => {
    for (const it of opened.splice(0)) await it.destroy()
  })

  // A store this process holds, served by a Holder given `options`.
  async function serve (options) {
    const dir = path.join(t.dir, 'store')
    const store = t.open({ share: false })
    await store.open()
    const holding = new Holder(store, dir, options)
    expect(await holding.listen(path.join(dir, 'tmp'))).to.equal(true)
    opened.push({ destroy: () => holding.close() })
    return { dir, store, socket: path.join(dir, 'kfs.sock'), close: () => holding.close() }
  }

  // A raw connection that sends `text`; its `answer` resolves to all the holder sent,
  // once it closed the connection.
  function connect (socket, text = '') {
    const s = net.connect(socket)
    opened.push(s)
    const parts = []
    s.on('data', (part) => parts.push(part)).on('error', () => {})
    if (text) s.write(text)
    s.answer = once(s, 'close').then(() => Buffer.concat(parts).toString('latin1'))
    return s
  }

  const request = (socket, method, url, { headers = {}, body } = {}) => new Promise((resolve, reject) => {
    const req = require('node:http').request({ socketPath: socket, method, path: url, headers, agent: false }, (res) => {
      const parts = []
      res.on('data', (part) => parts.push(part)).on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: Buffer.concat(parts).toString('utf8') }))
    })
    req.on('error', reject)
    req.end(body)
  })

  it('HEAD answers a file\'s headers and no body, 404 ENOENT for none; verify and call given JSON of another shape are 400 EINVAL', async () => {
    const { store, socket, close } = await serve()
    await store.writeFile('k', 'hello')
    const head = await request(socket, 'HEAD', '/v1/files/k')
    expect(head.status).to.equal(200)
    expect(head.headers).to.include({ 'kfs-size': '5', 'kfs-sha256': crypto.createHash('sha256').update('hello').digest('hex'), 'content-length': '5' })
    expect(head.body).to.equal('')
    const range = await request(socket, 'HEAD', '/v1/files/k', { headers: { range: 'bytes=1-2' } })
    expect(range.status).to.equal(206)
    expect(range.headers).to.include({ 'content-range': 'bytes 1-2/5', 'content-length': '2' })
    expect((await request(socket, 'HEAD', '/v1/files/none')).status).to.equal(404)
    expect(JSON.parse((await request(socket, 'GET', '/v1/files/none')).body).error.code).to.equal('ENOENT')
    for (const [url, body] of [['/v1/verify', 'null'], ['/v1/verify', '[]'], ['/v1/verify', '3'], ['/v1/call/stat', 'null'], ['/v1/call/stat', '{"0":"k"}'], ['/v1/call/stat', '"k"']]) {
      const answer = await request(socket, 'POST', url, { body, headers: { 'content-type': 'application/json' } })
      expect(answer.status, `${url} ${body}`).to.equal(400)
      expect(JSON.parse(answer.body).error).to.include({ code: 'EINVAL', argument: 'body' })
    }
    // An empty body is no arguments.
    expect(JSON.parse((await request(socket, 'POST', '/v1/call/usage')).body).result.files).to.equal(1)
    expect(JSON.parse((await request(socket, 'POST', '/v1/verify')).body.split('\n')[0]).result.problems).to.deep.equal([])
    await close()
  })

  it('a file\'s headers describe the version its body is, though it was replaced after a stat', async () => {
    // The holder reads no stat for its headers; were it to, this one is out of date.
    const { store, socket, close } = await serve()
    await store.writeFile('k', 'first version')
    const stat = store.stat.bind(store)
    store.stat = async (key) => {
      const got = await stat(key)
      await store.writeFile(key, 'the second, longer version')
      return got
    }
    for (const headers of [{}, { range: 'bytes=4-' }]) {
      const got = await request(socket, 'GET', '/v1/files/k', { headers })
      const whole = String(await store.readFile('k')).slice(0, Number(got.headers['kfs-size']))
      expect(got.body, 'the body of the version in the headers').to.equal(whole.slice(headers.range ? 4 : 0))
      expect(got.headers['kfs-sha256']).to.equal(crypto.createHash('sha256').update(whole).digest('hex'))
      if (headers.range) expect(got.headers['content-range']).to.equal(`bytes 4-${whole.length - 1}/${whole.length}`)
    }
    await close()
  })

  it('a connection that sends no headers, or half, is answered 408 and closed; one that stops in a JSON body is cut', async () => {
    const { socket, close } = await serve({ headersMs: 300, idleMs: 300 })
    const nothing = connect(socket)
    const half = connect(socket, 'GET /v1/files/k HTTP/1.1\r\nHost: kfs\r\n')
    const body = connect(socket, 'POST /v1/call/stat HTTP/1.1\r\nHost: kfs\r\nContent-Length: 10\r\n\r\n["k')
    const [a, b, c] = await within(Promise.all([nothing.answer, half.answer, body.answer]), 10000, 'the cuts')
    expect(a).to.match(/^HTTP\/1.1 408/)
    expect(b).to.match(/^HTTP\/1.1 408/)
    expect(c).to.equal('')
    await close()
  })

  it('past its cap, the connections that held nothing longest are cut; a request past as many under way is answered 503 EBUSY not done, and a client makes its call again until it is served', async () => {
    const { dir, socket, close } = await serve({ maxConnections: 2 })
    // One that sent nothing, then one whose JSON body is still coming: each is cut once
    // a newer one passes the cap.
    const idle = [connect(socket)]
    await sleep(50)
    idle.push(connect(socket, 'POST /v1/call/stat HTTP/1.1\r\nHost: kfs\r\nContent-Length: 10\r\n\r\n["k'))
    await sleep(50)
    for (const cut of idle.slice()) {
      idle.push(connect(socket))
      expect(await within(cut.answer, 5000, 'the cut'), 'cut without an answer').to.equal('')
    }
    await sleep(300)
    expect(idle.map((s) => s.destroyed), 'the two newer ones kept').to.deep.equal([true, true, false, false])
    // A request sent at once is served, though its connection passed the cap.
    expect(JSON.parse((await request(socket, 'POST', '/v1/call/exists', { body: '["k"]' })).body)).to.deep.equal({ result: false })
    for (const s of idle) s.destroy()
    const client = kfs(dir) // reaches the holder before the cap is full
    opened.push({ destroy: () => client.close() })
    expect(await client.exists('a')).to.equal(false)
    // Two writes under way fill the cap.
    const writes = ['a', 'b'].map((key) => connect(socket, `PUT /v1/files/${key} HTTP/1.1\r\nHost: kfs\r\nConnection: close\r\nContent-Length: 10\r\n\r\nab`))
    await sleep(200)
    const refused = await request(socket, 'POST', '/v1/call/exists', { body: '["k"]' })
    expect(refused.status).to.equal(503)
    expect(refused.headers.connection).to.equal('close')
    expect(JSON.parse(refused.body).error).to.include({ code: 'EBUSY' })
    expect(JSON.parse(refused.body).error.message).to.match(/serving as many requests as it takes at once \(2, from its descriptor limit\)/)
    expect(refused.headers['kfs-not-done'], 'refused as not done').to.equal('1')
    const { Remote } = require('../lib/share/client')
    const err = await rejects(Remote.connect(socket), 'EBUSY')
    expect(err.message).to.match(/try again later/)
    const { unreachedWhy } = require('../lib/share/unreached')
    expect(await unreachedWhy(dir, err)).to.match(/^which is serving as many requests as its descriptor limit lets it take at once: try again later/)
    // A client's call is made again until a write ends and it is served.
    const exists = client.exists('a')
    await sleep(300)
    writes[0].write('abcdefgh')
    expect(await within(writes[0].answer, 5000, 'the write')).to.match(/^HTTP\/1.1 200/)
    expect(await within(exists, scaled(5000), 'the client\'s call'), 'served once a write ended').to.equal(true)
    expect((await request(socket, 'POST', '/v1/call/exists', { body: '["a"]' })).body).to.equal('{"result":true}')
    writes[1].destroy()
    await close()
  })

  it('serves as many requests at once as a quarter of what the shards leave of the descriptor limit, at most 1,024', () => {
    const { defaultConnections } = require('../lib/dir/descriptors')
    expect([128, 160, 1024, 4000, 1048576, Infinity].map((limit) => defaultConnections(limit))).to.deep.equal([16, 16, 64, 250, 1024, 1024])
  })

  it('a holder with 160 descriptors, a burst of 1,000 connections that never finish a request: all queue, another process\'s stat and the holder\'s own writes succeed', async function () {
    if (spawnSync('prlimit', ['--version']).error) this.skip() // prlimit (util-linux) sets the holder's descriptor limit
    const dir = path.join(t.dir, 'store')
    const script = `
      const store = require('./')(process.argv[1])
      store.writeFile('k', 'v').then(() => console.log('holding'))
      process.stdin.once('data', async () => {
        const results = await Promise.allSettled(Array.from({ length: 40 }, (_, i) => store.writeFile('w' + i, 'x')))
        console.log(JSON.stringify(results.filter((r) => r.status === 'rejected').map((r) => r.reason.code)))
        await store.close()
        process.exit(0)
      })`
    const child = spawn('prlimit', ['--nofile=160:160', '--', process.execPath, '-e', script, dir], { cwd: ROOT, stdio: ['pipe', 'pipe', 'inherit'] })
    const exited = once(child, 'exit')
    const sockets = []
    try {
      const lines = child.stdout.setEncoding('utf8')
      expect(String((await once(lines, 'data'))[0])).to.equal('holding\n')
      // Stopped, it accepts none: every connection waits in the listen backlog.
      process.kill(child.pid, 'SIGSTOP')
      const parts = ['', 'GET /v1/files/k HTTP/1.1\r\nHost: kfs\r\n', 'POST /v1/call/stat HTTP/1.1\r\nHost: kfs\r\nContent-Length: 10\r\n\r\n["k']
      const failed = []
      await Promise.all(Array.from({ length: 1000 }, (_, i) => new Promise((resolve) => {
        const s = net.connect(path.join(dir, 'kfs.sock'), () => { s.write(parts[i % 3]); resolve() })
        sockets.push(s)
        s.on('error', (err) => { failed.push(err.code); resolve() })
      })))
      expect(failed.length, `connections refused by a full backlog (${[...new Set(failed)]})`).to.equal(0)
      process.kill(child.pid, 'SIGCONT')
      const client = kfs(dir)
      expect((await within(client.stat('k'), 10000, 'the stat')).size).to.equal(1)
      await client.close()
      child.stdin.write('write\n')
      expect(String((await within(once(lines, 'data'), 20000, 'the writes'))[0])).to.equal('[]\n')
    } finally {
      for (const s of sockets) s.destroy()
      process.kill(child.pid, 'SIGCONT')
      child.kill()
      await exited
    }
  })
})

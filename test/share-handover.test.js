'use strict'

// A holder's handover: a holder that closes finishes the requests it accepted and
// refuses later ones as not carried out; a client makes again every call that never
// reached a holder, and every idempotent one, until the open's deadline; parallel
// commands on a store no process holds for long all succeed.
const { expect } = require('chai')
const fs = require('node:fs')
const path = require('node:path')
const net = require('node:net')
const http = require('node:http')
const { once } = require('node:events')
const { spawn } = require('node:child_process')
const { Readable } = require('node:stream')
const { pipeline } = require('node:stream/promises')
const kfs = require('..')
const { Holder } = require('../lib/share/server')
const { Remote } = require('../lib/share/client')
const { NOT_DONE, UNSENT } = require('../lib/share/failures')
const { useTmp, rejects, scaled, sleep, within, bytes, sha256 } = require('./helpers')
const { holder, ROOT } = require('./share-harness')
const { BIN } = require('./cli-harness')

// Runs `kfs args...` on the store at `dir`; resolves to { code, stderr }.
function command (dir, args) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, '--db', dir, ...args], { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, KFS_DEBUG: '' } })
    let stderr = ''
    child.stderr.on('data', (d) => (stderr += d))
    child.on('error', reject)
    child.on('close', (code) => resolve({ code, stderr, args }))
  })
}

// A request on `socket` (a Unix socket path), resolved to { status, body }.
function request (socket, method, url, body) {
  return new Promise((resolve, reject) => {
    const req = http.request({ socketPath: socket, method, path: url, agent: false }, (res) => {
      const parts = []
      res.on('data', (d) => parts.push(d))
      res.on('end', () => resolve({ status: res.statusCode, body: Buffer.concat(parts).toString() }))
    })
    req.on('error', reject)
    req.end(body)
  })
}

describe('a holder\'s handover', function () {
  this.timeout(scaled(90000))
  const t = useTmp()

  it('24 `kfs put` at once, then 24 mixed reads, on a store no process holds for long: every command succeeds, with nothing on stderr', async () => {
    const dir = path.join(t.dir, 'store')
    const inputs = Array.from({ length: 24 }, (_, i) => {
      const file = path.join(t.dir, `in${i}`)
      fs.writeFileSync(file, bytes(1000 + i * 5000, `p${i}`))
      return file
    })
    const puts = await Promise.all(inputs.map((file) => command(dir, ['put', file])))
    expect(puts.filter((r) => r.code !== 0 || r.stderr), 'failed puts').to.deep.equal([])
    const keys = inputs.map((file) => sha256(fs.readFileSync(file)))
    const reads = await Promise.all(keys.map((key, i) => command(dir, [['get', 'stat', 'exists', 'list'][i % 4], ...(i % 4 === 3 ? [] : [key]), ...(i % 4 === 0 ? [path.join(t.dir, `out${i}`)] : [])])))
    expect(reads.filter((r) => r.code !== 0 || r.stderr), 'failed reads').to.deep.equal([])
    for (let i = 0; i < keys.length; i += 4) expect(sha256(fs.readFileSync(path.join(t.dir, `out${i}`)))).to.equal(keys[i])
  })

  it('after its holder closed, a client\'s next write, unlink, stream, put of a stream or maintenance call takes the store over and succeeds', async () => {
    const dir = path.join(t.dir, 'store')
    const seeded = kfs(dir)
    for (const key of ['u', 'v']) await seeded.writeFile(key, key)
    await seeded.close()
    const calls = {
      writeFile: (s) => s.writeFile('w', 'written'),
      unlink: (s) => s.unlink('u'),
      writeStream: (s) => pipeline(Readable.from([Buffer.from('stream')]), s.createWriteStream('ws')),
      putStream: (s) => s.put(Readable.from([Buffer.from('put')])),
      reclaim: (s) => s.reclaim(),
      compact: (s) => s.compact(),
      verify: (s) => s.verify(),
      repair: (s) => s.repair(0).catch((err) => { if (err.code !== 'ENOENT') throw err })
    }
    for (const [name, call] of Object.entries(calls)) {
      const held = await holder(dir)
      const client = kfs(dir)
      expect(await client.exists('v')).to.equal(true)
      expect(client.heldBy).to.equal(held.child.pid)
      await held.stop()
      await call(client).catch((err) => { throw new Error(`${name}: ${err.code} ${err.message}`) })
      expect(client.heldBy, name).to.equal(process.pid)
      await client.close()
    }
    const store = kfs(dir)
    expect(String(await store.readFile('w'))).to.equal('written')
    expect(String(await store.readFile('ws'))).to.equal('stream')
    expect(await store.exists('u')).to.equal(false)
    expect((await store.verify()).problems).to.deep.equal([])
    await store.close()
  })

  it('the store that takes over from a killed holder knows it (takenOver), and only that one, sharing or not; not after a holder that closed', async () => {
    const dir = path.join(t.dir, 'store')
    const seeded = kfs(dir)
    await seeded.writeFile('k', 'k')
    await seeded.close()
    expect(seeded.takenOver).to.equal(false)
    let held = await holder(dir)
    await held.kill()
    const first = kfs(dir, { share: false }) // which makes no socket of its own
    await first.open()
    expect(first.takenOver).to.equal(true)
    await first.close()
    const second = kfs(dir)
    await second.open()
    expect(second.takenOver).to.equal(false)
    await second.close()
    // A client whose holder is killed, then takes the store over.
    held = await holder(dir)
    const client = kfs(dir)
    expect(await client.exists('k')).to.equal(true)
    expect([client.heldBy, client.takenOver]).to.deep.equal([held.child.pid, false])
    await held.kill()
    expect(await client.exists('k')).to.equal(true)
    expect([client.heldBy, client.takenOver]).to.deep.equal([process.pid, true])
    await client.close()
    held = await holder(dir)
    await held.stop()
    const after = kfs(dir)
    await after.open()
    expect(after.takenOver).to.equal(false)
    await after.close()
  })

  it('a holder that closes finishes a read and a write stream it accepted before it releases the store', async () => {
    const dir = path.join(t.dir, 'store')
    const big = bytes(4 * 1024 * 1024 + 3, 'big')
    const held = await holder(dir)
    const client = kfs(dir)
    await client.writeFile('big', big)
    const reader = client.createReadStream('big')
    const first = await new Promise((resolve) => reader.once('readable', () => resolve(reader.read())))
    reader.pause()
    const writer = client.createWriteStream('new', { size: big.length })
    // Once a write stream's first part is written, the holder took its request.
    await new Promise((resolve, reject) => writer.write(big.subarray(0, 1000000), (err) => (err ? reject(err) : resolve())))
    const stopped = held.stop()
    await sleep(500)
    expect(await Promise.race([held.exited.then(() => 'exited'), sleep(0).then(() => 'holding')]), 'the holder waits for its requests').to.equal('holding')
    const rest = []
    for await (const part of reader) rest.push(part)
    expect(Buffer.concat([first, ...rest]).equals(big)).to.equal(true)
    writer.end(big.subarray(1000000))
    await once(writer, 'finish')
    await stopped
    expect((await client.readFile('new')).equals(big)).to.equal(true)
    expect(client.heldBy).to.equal(process.pid)
    await client.close()
  })

  it('a closing holder refuses new requests, on new and earlier connections, as ECLOSED not done, and releases its socket once its requests ended', async () => {
    const dir = path.join(t.dir, 'store')
    fs.mkdirSync(path.join(dir, 'tmp'), { recursive: true })
    fs.writeFileSync(path.join(dir, 'format.json'), '{}')
    let release
    const stalled = new Promise((resolve) => { release = resolve })
    const store = { exists: () => stalled, referenceId: 'r', chunkSize: 1, shardCapacity: 1, shardCount: 1 }
    const served = new Holder(store, dir)
    expect(await served.listen(path.join(dir, 'tmp'))).to.equal(true)
    const socket = path.join(dir, 'kfs.sock')
    const inFlight = request(socket, 'POST', '/v1/call/exists', '["k"]')
    const early = net.connect(socket)
    await once(early, 'connect')
    await sleep(50) // the first request reached the holder
    let closed = false
    const closing = served.close().then(() => { closed = true })
    await sleep(50)
    early.end('POST /v1/call/stat HTTP/1.1\r\nHost: kfs\r\nConnection: close\r\nContent-Length: 2\r\n\r\n[]')
    const [refusal] = await within(once(early, 'data'), 5000, 'the refusal')
    expect(String(refusal)).to.match(/^HTTP\/1\.1 503 /).and.match(/\r\nkfs-not-done: 1\r\n/).and.match(/"code":"ECLOSED"/)
    const later = await within(request(socket, 'POST', '/v1/call/info', '[]'), 5000, 'a later request')
    expect(later.status).to.equal(503)
    expect(closed, 'it waits for the request in flight').to.equal(false)
    release(true)
    expect(await inFlight).to.deep.equal({ status: 200, body: '{"result":true}' })
    await within(closing, 5000, 'the close')
    expect(fs.existsSync(socket), 'the socket removed').to.equal(false)
  })

  it('a listing under way when its holder closes fails, without a file twice', async () => {
    const dir = path.join(t.dir, 'store')
    const seeded = kfs(dir, { share: false })
    // 1,500 names of 4,000 bytes: more than the socket and the client buffer hold.
    for (let i = 0; i < 1500; i += 500) await Promise.all(Array.from({ length: 500 }, (_, j) => seeded.writeFile(`file-${i + j}-${'n'.repeat(4000)}`, 'x')))
    await seeded.close()
    const held = await holder(dir)
    const client = kfs(dir)
    const listing = client.list()[Symbol.asyncIterator]()
    const seen = [(await listing.next()).value.name]
    await within(held.stop(), 15000, 'the holder\'s exit')
    let failure
    try {
      for (let next = await listing.next(); !next.done; next = await listing.next()) seen.push(next.value.name)
    } catch (err) {
      failure = err
    }
    expect(new Set(seen).size, 'no file twice').to.equal(seen.length)
    expect(failure && failure.code, 'the listing under way fails').to.equal('ECONNRESET')
    await client.close()
  })

  it('a closing holder cuts off a read its client stopped taking, after 5 s without a byte, and exits', async () => {
    const dir = path.join(t.dir, 'store')
    const held = await holder(dir)
    const client = kfs(dir)
    await client.writeFile('big', bytes(32 * 1024 * 1024, 'big'))
    const reader = client.createReadStream('big')
    await once(reader, 'readable')
    reader.pause()
    const stopped = Date.now()
    await within(held.stop(), 15000, 'the holder\'s exit')
    expect(Date.now() - stopped).to.be.at.least(4500)
    const failure = await new Promise((resolve) => reader.on('error', resolve).resume())
    expect(failure.code).to.equal('ECONNRESET')
    await client.close()
  })

  it('a client waits for a holder that takes longer than 5 s to close, and then takes the store over', async () => {
    const dir = path.join(t.dir, 'store')
    const held = await holder(dir)
    const writing = kfs(dir)
    const writer = writing.createWriteStream('slow')
    await new Promise((resolve, reject) => writer.write('part 0;', (err) => (err ? reject(err) : resolve())))
    const stopped = held.stop()
    const wait = kfs(dir)
    const waited = wait.writeFile('after', 'the close')
    for (let i = 1; i < 14; i++) {
      await new Promise((resolve) => setTimeout(resolve, 500))
      writer.write(`part ${i};`)
    }
    writer.end()
    await once(writer, 'finish')
    await stopped
    await waited
    expect(String(await wait.readFile('slow'))).to.equal(Array.from({ length: 14 }, (_, i) => `part ${i};`).join(''))
    expect([writing.heldBy, wait.heldBy]).to.include(process.pid)
    await Promise.all([writing.close(), wait.close()])
  })

  it('a client makes a call the holder refused or never got again, and an idempotent one until the open\'s deadline; a write that may have been made is not', async () => {
    // The store is held by a process that does not serve it, beside which a fake holder
    // on kfs.sock cuts off the first three calls, and every unlink and stat, after their
    // request came.
    const dir = path.join(t.dir, 'store')
    const script = `
      const http = require('node:http')
      const store = require('./')(process.argv[1], { share: false })
      let cut = Number(process.argv[2])
      store.open().then(() => {
        http.createServer((req, res) => {
          req.resume()
          if (req.url === '/v1/call/info') return res.end(JSON.stringify({ result: { referenceId: store.referenceId, chunkSize: 1, shardCapacity: 1, shardCount: 256, pid: process.pid } }))
          if (req.method === 'DELETE' || req.url === '/v1/call/stat' || cut-- > 0) return req.socket.destroy()
          res.end('{"result":true}')
        }).listen(require('node:path').join(process.argv[1], 'kfs.sock'), () => console.log('serving'))
      })`
    const fake = spawn(process.execPath, ['-e', script, dir, '3'], { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] })
    try {
      await once(fake.stdout, 'data')
      const client = kfs(dir)
      expect(await client.exists('k'), 'made again after three losses').to.equal(true)
      const unlinked = await rejects(client.unlink('k'), 'ECONNRESET') // it may have been made
      expect(unlinked[NOT_DONE]).to.equal(undefined)
      // An idempotent call made again and again is given up 5 s after its first failure.
      const since = Date.now()
      await within(rejects(client.stat('k'), 'ECONNRESET'), 15000, 'a stat its holder always cuts off')
      expect(Date.now() - since).to.be.at.least(5000)
      await client.close()
    } finally {
      fake.kill('SIGKILL')
      await once(fake, 'exit')
    }
  })

  it('a client\'s failures say whether the call was carried out: a connection never made is UNSENT, a holder\'s ECLOSED is NOT_DONE', async () => {
    const dir = path.join(t.dir, 'store')
    fs.mkdirSync(dir)
    const lost = []
    const remote = new Remote(path.join(dir, 'kfs.sock'), (r) => lost.push(r))
    const never = await rejects(remote.call('exists', 'k'), 'ECONNRESET')
    expect([never[NOT_DONE], never[UNSENT]]).to.deep.equal([true, true])
    let refusing = true
    const refuse = (req, res) => {
      res.writeHead(503, { 'content-type': 'application/json', ...(refusing && { 'kfs-not-done': '1' }) })
      res.end(JSON.stringify({ error: { code: 'ECLOSED', message: 'the store is closed' } }))
    }
    const server = http.createServer(refuse).on('checkContinue', refuse) // as a closing holder
    await new Promise((resolve) => server.listen(path.join(dir, 'kfs.sock'), resolve))
    try {
      const refused = await rejects(remote.call('exists', 'k'), 'ECONNRESET')
      expect(refused[NOT_DONE]).to.equal(true)
      // A Readable body waits for the holder's 100 Continue: refused before, it is unread.
      const source = Readable.from([Buffer.from('body')])
      const put = await rejects(remote.put(source), 'ECONNRESET')
      expect([put[NOT_DONE], put[UNSENT], source.readableFlowing]).to.deep.equal([true, true, null])
      // ECLOSED without the refusal's header: the holder's store closed under a request
      // it had taken, which may or may not have been carried out.
      refusing = false
      const cut = await rejects(remote.call('exists', 'k'), 'ECONNRESET')
      expect(cut[NOT_DONE]).to.equal(undefined)
      expect(lost).to.deep.equal([remote, remote, remote, remote])
    } finally {
      server.close()
    }
  })
})

describe('a store that is not shared: where it can be, and what a client is told', function () {
  this.timeout(scaled(60000))
  const t = useTmp()

  // A directory under the test's whose kfs.sock path is `length` bytes long.
  const dirWithSocketPath = (length) => path.join(t.dir, 'd'.repeat(length - Buffer.byteLength(path.join(t.dir, 'x', 'kfs.sock')) + 1))

  it('a store whose socket path is 107 bytes long is shared', async () => {
    const dir = dirWithSocketPath(107)
    expect(Buffer.byteLength(path.join(dir, 'kfs.sock'))).to.equal(107)
    const held = await holder(dir)
    try {
      expect(fs.statSync(path.join(dir, 'kfs.sock')).isSocket()).to.equal(true)
      const client = kfs(dir)
      await client.writeFile('a', 'long')
      expect(client.heldBy).to.equal(held.child.pid)
      await client.close()
    } finally {
      await held.stop()
    }
  })

  it('EBUSY says what is known: a path too long to share, something else at kfs.sock, a holder that does not answer', async () => {
    const long = dirWithSocketPath(108)
    const planted = path.join(t.dir, 'planted')
    const frozen = path.join(t.dir, 'frozen')
    const dirs = [long, planted, frozen]
    for (const dir of dirs) {
      const made = kfs(dir)
      await made.open()
      await made.close()
    }
    fs.mkdirSync(path.join(planted, 'kfs.sock'))
    const holders = []
    try {
      for (const dir of dirs) holders.push(await holder(dir))
      holders[2].child.kill('SIGSTOP')
      const failures = await Promise.all(dirs.map((dir) => rejects(kfs(dir).open(), 'EBUSY')))
      expect(failures.map((err) => err.pid)).to.deep.equal(holders.map((h) => h.child.pid))
      expect(failures[0].message).to.include('would be longer than the 107 bytes Linux takes')
      expect(failures[1].message).to.include(`${path.join(planted, 'kfs.sock')} is not a socket`)
      expect(failures[2].message).to.match(/process \d+, which did not answer within 5 s/)
    } finally {
      for (const h of holders) h.child.kill('SIGCONT')
      await Promise.all(holders.map((h) => h.stop()))
    }
  })
})

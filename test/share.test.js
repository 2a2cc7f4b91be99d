'use strict'

// One store, many processes (lib/share/): the process that holds a store serves it on
// a Unix socket in its directory, and another kfs(dir) uses it through that socket.
const { expect } = require('chai')
const fs = require('node:fs')
const path = require('node:path')
const crypto = require('node:crypto')
const net = require('node:net')
const { once } = require('node:events')
const { spawn, execFileSync } = require('node:child_process')
const { Readable } = require('node:stream')
const { pipeline } = require('node:stream/promises')
const kfs = require('..')
const { useTmp, rejects } = require('./helpers')

const ROOT = path.join(__dirname, '..')

// A process holding the store at `dir` until its stdin ends; resolves once it serves.
function holder (dir, options = {}) {
  const script = `
    const store = require('./')(process.argv[1], ${JSON.stringify(options)})
    store.open().then(() => console.log('holding'))
    process.stdin.resume()
    process.stdin.on('end', () => store.close().then(() => process.exit(0)))`
  const child = spawn(process.execPath, ['-e', script, dir], { cwd: ROOT, stdio: ['pipe', 'pipe', 'inherit'] })
  return new Promise((resolve, reject) => {
    child.stdout.once('data', () => resolve({ child, stop: () => { child.stdin.end(); return new Promise((resolve) => child.once('exit', resolve)) } }))
    child.once('exit', (code) => reject(new Error(`the holder exited with ${code}`)))
  })
}

describe('one store, many processes', function () {
  this.timeout(60000)
  const t = useTmp()

  it('another process uses every call through the holder, with the same results and error codes', async () => {
    const dir = path.join(t.dir, 'store')
    const held = await holder(dir)
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
      await rejects(store.repair(0), 'ENOENT')
      expect(await rejects(store.writeFile('', 'x'), 'EINVAL')).to.be.an.instanceOf(RangeError)
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
})

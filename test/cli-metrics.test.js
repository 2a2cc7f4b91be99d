'use strict'

// kfs metrics: the store's metrics as Prometheus's text or JSON, and --listen, which serves
// whichever process holds the store over TCP and never holds it itself.
const { expect } = require('chai')
const http = require('node:http')
const net = require('node:net')
const { spawn } = require('node:child_process')
const { once } = require('node:events')
const { useCli, BIN } = require('./cli-harness')
const { holder } = require('./share-harness')
const { within, scaled } = require('./helpers')

// { status, headers, body } of one request, on a connection of its own.
function request (url, method = 'GET') {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method, agent: false }, (res) => {
      let body = ''
      res.setEncoding('utf8')
      res.on('data', (d) => (body += d))
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body }))
    })
    req.on('error', reject)
    req.end()
  })
}

// `kfs metrics --listen ADDRESS` as a process, resolved once it serves, with its URL.
async function listener (db, address = '127.0.0.1:0') {
  const child = spawn(process.execPath, [BIN, 'metrics', '--listen', address], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, KFS_DB: db } })
  let stderr = ''
  child.stderr.setEncoding('utf8')
  const url = await within(new Promise((resolve, reject) => {
    child.stderr.on('data', (d) => {
      stderr += d
      const m = /on (http:\S+)\n/.exec(stderr)
      if (m) resolve(m[1])
    })
    child.once('exit', (code) => reject(new Error(`kfs metrics --listen exited with ${code}: ${stderr}`)))
  }), scaled(10000), 'the listener\'s start')
  return { child, url, stop: async () => { child.kill('SIGTERM'); return once(child, 'exit') } }
}

const sample = (text, name) => {
  const line = text.split('\n').find((l) => l.startsWith(`${name} `))
  return line === undefined ? undefined : Number(line.slice(name.length + 1))
}

describe('kfs metrics', function () {
  const c = useCli()

  it('prints the store\'s metrics as Prometheus\'s text, or as JSON, with or without a holder', async () => {
    await c.cli(['put'], { input: 'one' })
    const text = await c.cli(['metrics'])
    expect(text.code).to.equal(0)
    expect(sample(text.stdout.toString(), 'kfs_files')).to.equal(1)
    expect(text.stdout.toString()).to.match(/^# TYPE kfs_operation_duration_seconds histogram$/m)
    const held = await holder(c.db)
    try {
      await c.cli(['put'], { input: 'two' })
      const json = JSON.parse((await c.cli(['metrics', '--json'])).stdout)
      expect(json.files).to.equal(2)
      expect(json.operations.put.count).to.equal(1) // the holder's count: the put beside it
      expect(sample((await c.cli(['metrics'])).stdout.toString(), 'kfs_operations_total{op="put"}')).to.equal(1)
    } finally {
      await held.stop()
    }
  })

  it('--listen serves the holder\'s metrics across its restarts, 503 while none holds the store, and never holds it', async () => {
    await c.cli(['put'], { input: 'one' })
    const served = await listener(c.db)
    try {
      const none = await request(served.url)
      expect(none.status).to.equal(503)
      expect(none.body).to.match(/no process holds the store/)
      // It holds nothing: a holder starts beside it, and is what it serves.
      const first = await holder(c.db)
      const up = await request(served.url)
      expect(up.status).to.equal(200)
      expect(up.headers['content-type']).to.equal('text/plain; version=0.0.4')
      expect(sample(up.body, 'kfs_files')).to.equal(1)
      await first.kill()
      expect((await request(served.url)).status).to.equal(503)
      const second = await holder(c.db)
      try {
        await c.cli(['put'], { input: 'two' })
        const again = await request(served.url)
        expect(again.status).to.equal(200)
        expect(sample(again.body, 'kfs_files')).to.equal(2)
        expect(sample(again.body, 'kfs_operations_total{op="put"}')).to.equal(1) // the second holder's own count
        const head = await request(served.url, 'HEAD')
        expect([head.status, head.body]).to.deep.equal([200, ''])
      } finally {
        await second.stop()
      }
      expect((await request(served.url.replace(/\/metrics$/, '/other'))).status).to.equal(404)
      const post = await request(served.url, 'POST')
      expect([post.status, post.headers.allow]).to.deep.equal([405, 'GET, HEAD'])
      expect(served.child.exitCode).to.equal(null)
    } finally {
      const [code, signal] = await served.stop()
      expect([code, signal]).to.deep.equal([null, 'SIGTERM'])
    }
  })

  it('--listen refuses a bad address, a port in use and a missing store', async () => {
    const bad = await c.cli(['metrics', '--listen', 'localhost'])
    expect(bad.code).to.equal(2)
    expect(bad.stderr).to.match(/^kfs: option '--listen <address>' argument 'localhost' is invalid\. must be HOST:PORT/)
    expect((await c.cli(['metrics', '--listen', ':65536'])).code).to.equal(2)
    const missing = await c.cli(['metrics', '--listen', '127.0.0.1:0'])
    expect(missing.code).to.equal(1)
    expect(missing.stderr).to.match(/there is no kfs store/)
    await c.cli(['put'], { input: 'one' })
    const taken = net.createServer()
    await new Promise((resolve) => taken.listen(0, '127.0.0.1', resolve))
    try {
      const inUse = await c.cli(['--json', 'metrics', '--listen', `127.0.0.1:${taken.address().port}`])
      expect(inUse.code).to.equal(1)
      expect(JSON.parse(inUse.stderr).error.code).to.equal('EADDRINUSE')
    } finally {
      taken.close()
    }
    // 192.0.2.1 (TEST-NET-1, RFC 5737) is no address of this machine's.
    const foreign = await c.cli(['metrics', '--listen', '192.0.2.1:0'])
    expect(foreign.code).to.equal(1)
    expect(foreign.stderr).to.match(/^kfs: .*EADDRNOTAVAIL.*\n$/)
  })

  it('--listen [IPv6]:PORT and :PORT name the address they listen on', async function () {
    await c.cli(['put'], { input: 'one' })
    const loopback = net.createServer()
    const ipv6 = await new Promise((resolve) => loopback.once('error', () => resolve(false)).listen(0, '::1', () => resolve(true)))
    loopback.close()
    if (!ipv6) this.skip() // a machine without IPv6's loopback
    for (const [address, shown] of [['[::1]:0', /^http:\/\/\[::1\]:\d+\/metrics$/], [':0', /^http:\/\/(\[::\]|0\.0\.0\.0):\d+\/metrics$/]]) {
      const served = await listener(c.db, address)
      try {
        expect(served.url, address).to.match(shown)
        // every interface: IPv4's loopback too
        const url = address === ':0' ? served.url.replace(/\/\/[^/]+:/, '//127.0.0.1:') : served.url
        expect((await request(url)).status, address).to.equal(503)
      } finally {
        await served.stop()
      }
    }
  })
})

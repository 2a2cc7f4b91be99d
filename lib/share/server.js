'use strict'

const fs = require('node:fs/promises')
const http = require('node:http')
const { once } = require('node:events')
const { pipeline } = require('node:stream/promises')
const { VERSION, ERROR_TRAILER, CALLS, MAX_SOCKET_PATH, socketPath, encodeError, statusOf } = require('./protocol')
const errors = require('../api/errors')

// The process that holds a store serves it to the others (protocol.js) on a Unix
// socket in the store's directory. Its lock makes it the only holder, so a socket found
// there at start is left by one that died, and is replaced. The socket may be reached
// by whoever may write the store's files: its owner, and its group where format.json is
// group-writable.
class Holder {
  #store
  #file
  #server
  #sockets = new Set()

  constructor (store, dir) {
    this.#store = store
    this.#file = socketPath(dir)
  }

  get file () {
    return this.#file
  }

  // Resolves to whether the store is now shared: a socket path longer than Linux takes
  // cannot be.
  async listen (mode) {
    if (Buffer.byteLength(this.#file) > MAX_SOCKET_PATH) return false
    await fs.rm(this.#file, { force: true })
    const server = http.createServer((req, res) => { this.#handle(req, res).catch(() => res.destroy()) })
    server.on('connection', (socket) => {
      this.#sockets.add(socket)
      socket.once('close', () => this.#sockets.delete(socket))
    })
    server.listen(this.#file)
    await once(server, 'listening')
    // Connecting takes write permission: the group's only where it may write the store.
    await fs.chmod(this.#file, mode & 0o020 ? 0o660 : 0o600)
    server.unref() // serving others never keeps this process alive
    this.#server = server
    return true
  }

  // Stops serving: requests in flight end with their connections.
  async close () {
    const server = this.#server
    if (!server) return
    this.#server = undefined
    const closed = new Promise((resolve) => server.close(resolve))
    for (const socket of this.#sockets) socket.destroy()
    await closed
    await fs.rm(this.#file, { force: true })
  }

  async #handle (req, res) {
    const url = new URL(req.url, 'http://kfs')
    const [, version, route, ...rest] = url.pathname.split('/')
    try {
      if (`/${version}` !== VERSION) throw errors.invalidValue('path', `${url.pathname} is not a path of this protocol (${VERSION}/...)`)
      const store = this.#store
      if (route === 'files' && rest.length) {
        const key = decodeURIComponent(rest.join('/'))
        if (req.method === 'GET' || req.method === 'HEAD') return await this.#sendFile(key, req, res)
        if (req.method === 'PUT') return await this.#receive(key, url, req, res)
        if (req.method === 'DELETE') return answer(res, await store.unlink(key))
      } else if (route === 'put' && req.method === 'POST') {
        return answer(res, await store.put(req))
      } else if (route === 'list' && req.method === 'GET') {
        const shard = url.searchParams.has('shard') ? Number(url.searchParams.get('shard')) : undefined
        return await lines(res, async (line) => { for await (const file of store.list(shard)) await line(file) })
      } else if (route === 'verify' && req.method === 'POST') {
        const { progress, ...options } = await jsonBody(req)
        return await lines(res, async (line) => {
          const result = await store.verify({ ...options, ...(progress ? { onProgress: (p) => { line({ progress: p }) } } : {}) })
          await line({ result })
        })
      } else if (route === 'call' && req.method === 'POST' && Object.hasOwn(CALLS, rest[0])) {
        const args = await jsonBody(req)
        if (rest[0] === 'info') return answer(res, { referenceId: store.referenceId, chunkSize: store.chunkSize, shardCapacity: store.shardCapacity, shardCount: store.shardCount, pid: process.pid })
        return answer(res, await store[rest[0]](...(Array.isArray(args) ? args : [])))
      }
      throw errors.invalidValue('request', `${req.method} ${url.pathname} is not one this protocol serves`)
    } catch (err) {
      fail(res, err)
    }
  }

  // The whole file or a range (Range: bytes=A-B), with its size and SHA-256 in headers.
  async #sendFile (key, req, res) {
    const stat = await this.#store.stat(key)
    const range = parseRange(req.headers.range)
    const headers = { 'content-type': 'application/octet-stream', 'kfs-size': stat.size, 'kfs-sha256': stat.sha256, trailer: ERROR_TRAILER }
    if (range) {
      const end = range.end === undefined ? stat.size - 1 : Math.min(range.end, stat.size - 1)
      headers['content-range'] = `bytes ${range.start}-${end}/${stat.size}`
    }
    const stream = this.#store.createReadStream(key, range)
    res.writeHead(range ? 206 : 200, headers)
    if (req.method === 'HEAD') {
      stream.destroy()
      return res.end()
    }
    res.once('close', () => stream.destroy())
    try {
      for await (const chunk of stream) {
        if (!res.write(chunk)) await drained(res)
        if (res.destroyed) return
      }
    } catch (err) {
      res.addTrailers({ [ERROR_TRAILER]: JSON.stringify(encodeError(err)) })
    }
    res.end()
  }

  async #receive (key, url, req, res) {
    const options = {}
    if (url.searchParams.has('sha256')) options.sha256 = url.searchParams.get('sha256')
    if (url.searchParams.has('size')) options.size = Number(url.searchParams.get('size'))
    const stream = this.#store.createWriteStream(key, options)
    await pipeline(req, stream)
    answer(res, { key: stream.key, size: stream.size, sha256: stream.sha256 })
  }
}

function parseRange (header) {
  if (!header) return undefined
  const m = /^bytes=(\d+)-(\d*)$/.exec(header)
  if (!m) throw errors.invalidValue('Range', `must be bytes=start-[end], got ${JSON.stringify(header)}`)
  return m[2] === '' ? { start: Number(m[1]) } : { start: Number(m[1]), end: Number(m[2]) }
}

async function jsonBody (req) {
  const parts = []
  for await (const part of req) parts.push(part)
  const text = Buffer.concat(parts).toString('utf8')
  if (!text) return {}
  try {
    return JSON.parse(text)
  } catch {
    throw errors.invalidValue('body', 'is not JSON')
  }
}

function answer (res, result) {
  const body = JSON.stringify({ result: result === undefined ? null : result })
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) })
  res.end(body)
}

function fail (res, err) {
  if (res.headersSent) return res.destroy()
  const body = JSON.stringify({ error: encodeError(err) })
  res.writeHead(statusOf(err), { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) })
  res.end(body)
}

// A body of JSON lines written as they come; a failure ends it with the error trailer.
async function lines (res, produce) {
  res.writeHead(200, { 'content-type': 'application/x-ndjson', trailer: ERROR_TRAILER })
  try {
    await produce(async (value) => {
      if (res.destroyed) throw errors.closed()
      if (!res.write(JSON.stringify(value) + '\n')) await drained(res)
    })
  } catch (err) {
    res.addTrailers({ [ERROR_TRAILER]: JSON.stringify(encodeError(err)) })
  }
  res.end()
}

// Until the response can take more, or is closed (the client went away).
function drained (res) {
  return new Promise((resolve) => {
    const done = () => {
      res.off('drain', done)
      res.off('close', done)
      resolve()
    }
    res.on('drain', done)
    res.on('close', done)
  })
}

module.exports = { Holder }

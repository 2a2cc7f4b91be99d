'use strict'

const fs = require('node:fs/promises')
const path = require('node:path')
const crypto = require('node:crypto')
const http = require('node:http')
const { pipeline } = require('node:stream/promises')
const { SOCKET, VERSION, ERROR_TRAILER, NOT_DONE_HEADER, CALLS, MAX_SOCKET_PATH, socketPath, encodeError, statusOf } = require('./protocol')
const errors = require('../api/errors')
const { SYNC, SERVED } = require('../api/args')
const { FORMAT_FILE } = require('../dir/format')
const { defaultConnections } = require('../dir/descriptors')
const { READING } = require('../data/streams')
const { Connections } = require('./connections')
// A JSON request body larger than this is refused.
const MAX_JSON = 1024 * 1024
// A client that takes no more of an answer, or sends nothing more of a request's body,
// for this long is cut off: what its request holds (a read, a shard lease, write
// budget) is given back.
const IDLE_MS = 60000
// JSON lines are sent in writes of about this many bytes.
const LINES_BYTES = 16384
// A request's headers must all have come this long after its connection opened (a
// later request on a connection kept alive: after its first byte), or it is answered
// 408 and its connection closed. Checked every CHECK_MS.
const HEADERS_MS = 10000
const CHECK_MS = 1000
// A connection kept alive after an answer is closed once idle this long.
const KEEP_ALIVE_MS = 5000
// Connections the kernel queues until they are accepted; Linux takes at most
// net.core.somaxconn (4096 since Linux 5.4).
const BACKLOG = 4096
// The routes whose request body is JSON: until it is in, their request holds nothing.
const JSON_ROUTES = new Set(['verify', 'call'])

// The process that holds a store serves it to the others (protocol.js) on a Unix
// socket in the store's directory. Its lock makes it the only holder, so a socket found
// there at start is left by one that died, and is replaced. The socket may be reached
// by whoever may write the store's files: its owner, and its group where format.json is
// group-writable.
//
// Each connection holds a descriptor, which the store's own shards must not run out
// of. `maxConnections` (by default a share of the descriptor limit:
// descriptors.defaultConnections) bounds them three ways:
// - at most that many requests are served at once: one more is answered 503 EBUSY
//   with kfs-not-done (#refusal: its client may try again), and its connection closed;
// - a connection holds nothing while it has no request under way, or one whose JSON
//   body is still coming; while there are more than maxConnections connections, those
//   that have held nothing the longest are cut (they lose nothing), once they have had
//   a moment to send a request (connections.js);
// - past twice maxConnections, a new connection is closed as soon as it is accepted.
class Holder {
  #store
  #file
  #server
  #connections
  #closing = false
  #idleMs
  #headersMs

  constructor (store, dir, { idleMs = IDLE_MS, headersMs = HEADERS_MS, maxConnections = defaultConnections() } = {}) {
    this.#store = store
    this.#file = socketPath(dir)
    this.#idleMs = idleMs
    this.#headersMs = headersMs
    this.#connections = new Connections({ max: maxConnections })
  }

  // Resolves to whether the store is now shared: not where a socket path would be longer
  // than Linux takes, nor when making the socket fails (the store is then used here
  // only). The socket is bound in a private directory of tmp/, given its mode, then
  // renamed into place: never reachable with a looser mode, and a stale one is replaced
  // whole.
  async listen (tmpDir) {
    const staging = path.join(tmpDir, `sock-${crypto.randomBytes(4).toString('hex')}`)
    const bound = path.join(staging, SOCKET)
    if (Buffer.byteLength(this.#file) > MAX_SOCKET_PATH) return false
    let dir // the staging directory, open: bound through /proc where its path is too long
    // No bound on a whole request: a write or a verify takes what time it takes (the
    // idle cuts bound a client that stalls).
    const server = http.createServer({
      requestTimeout: 0,
      headersTimeout: this.#headersMs,
      connectionsCheckingInterval: Math.min(CHECK_MS, this.#headersMs),
      keepAliveTimeout: KEEP_ALIVE_MS
    }, (req, res) => this.#request(req, res))
    server.maxConnections = 2 * this.#connections.max
    server.on('checkContinue', (req, res) => this.#request(req, res))
    server.on('connection', (socket) => this.#connections.add(socket))
    try {
      await fs.mkdir(staging, { mode: 0o700 })
      if (Buffer.byteLength(bound) > MAX_SOCKET_PATH) dir = await fs.open(staging, 'r')
      await new Promise((resolve, reject) => {
        server.once('error', reject)
        server.listen({ path: dir ? `/proc/self/fd/${dir.fd}/${SOCKET}` : bound, backlog: BACKLOG }, () => {
          server.off('error', reject)
          resolve()
        })
      })
      // A failure to accept a connection (out of descriptors) is the client's, never a
      // crash of this process.
      server.on('error', () => {})
      server.unref()
      await fs.chmod(bound, await this.#mode(bound))
      await fs.rename(bound, this.#file)
    } catch {
      server.close()
      return false
    } finally {
      if (dir) await dir.close().catch(() => {})
      await fs.rm(staging, { recursive: true, force: true }).catch(() => {})
    }
    this.#server = server
    return true
  }

  // Connecting takes write permission: the group gets it only where it may write the
  // store's format.json and is the group the socket was made with.
  async #mode (socket) {
    const [format, made] = await Promise.all([fs.stat(path.join(path.dirname(this.#file), FORMAT_FILE)), fs.stat(socket)])
    return format.mode & 0o020 && format.gid === made.gid ? 0o660 : 0o600
  }

  // Stops serving, and resolves once the requests it accepted ended (connections.js
  // cuts off those whose clients stall them). Meanwhile it refuses every new request
  // (503 ECLOSED, kfs-not-done), which tells its client that nothing was done and that
  // the store will be free soon. Then the socket is removed, so that no client
  // connects any more, and the connections made before are answered the same way.
  async close () {
    const server = this.#server
    if (!server) return
    this.#server = undefined
    this.#closing = true
    await this.#connections.drained()
    await fs.rm(this.#file, { force: true }).catch(() => {}) // what matters is that it no longer serves
    await this.#connections.drained({ settle: true })
    const closed = new Promise((resolve) => server.close(resolve))
    this.#connections.destroy()
    await closed
  }

  #request (req, res) {
    this.#connections.request(req, res)
    this.#handle(req, res).catch(() => res.destroy())
  }

  // Throws the refusal of a request while closing: nothing of it was done.
  #admit () {
    if (this.#closing || this.#store.status === 'closing') throw Object.assign(errors.closed(), { [NOT_DONE_HEADER]: true })
  }

  // Throws the refusal of a request the holder does not take: nothing of it was done.
  #serve (req, res) {
    if (this.#connections.serve(req, res)) return
    res.shouldKeepAlive = false
    throw Object.assign(this.#refusal(), { [NOT_DONE_HEADER]: true })
  }

  async #handle (req, res) {
    // The path as sent: a URL parser would drop the key `.` or `..`.
    const [pathname, search = ''] = req.url.split(/\?(.*)/s)
    const query = new URLSearchParams(search)
    const [, version, route, ...rest] = pathname.split('/')
    try {
      // Refused before anything is done, its body unread, by a holder that is closing
      // or serves as many requests as it takes: its client goes elsewhere, or tries
      // again. A JSON body is read before (it holds nothing meanwhile), and the close
      // checked again after it. Writes call the store in this turn, which admits them.
      this.#admit()
      if (`/${version}` !== VERSION) throw errors.invalidValue('path', `${pathname} is not a path of this protocol (${VERSION}/...)`)
      const store = this.#store
      const json = JSON_ROUTES.has(route) && req.method === 'POST'
      if (!json) this.#serve(req, res)
      if (req.headers.expect === '100-continue') res.writeContinue()
      const body = json ? await this.#json(req) : undefined
      if (json) {
        this.#admit()
        this.#serve(req, res)
      }
      if (route === 'files' && rest.length) {
        const key = decoded(rest.join('/'))
        if (req.method === 'GET' || req.method === 'HEAD') return await this.#sendFile(key, req, res)
        if (req.method === 'PUT') return await this.#receive(key, query, req, res)
        if (req.method === 'DELETE') return answer(res, await store.unlink(key, synced(query)))
      } else if (route === 'put' && req.method === 'POST') {
        this.#idle(req)
        return answer(res, await store.put(req, synced(query)))
      } else if (route === 'list' && req.method === 'GET') {
        const shard = query.get('shard')
        const only = shard === null ? undefined : shard === '' || !/^\d+$/.test(shard) ? shard : Number(shard)
        // No idle cut: a listing holds no shard while its client reads slowly.
        return await lines(res, undefined, async (line) => { for await (const file of store.list(only, { [SERVED]: true })) await line(file) })
      } else if (route === 'verify' && req.method === 'POST') {
        const { progress, ...options } = shaped(body, 'an object', {})
        return await lines(res, this.#idleMs, async (line, write) => {
          // Always given: it ends the check once the client went away. Progress is
          // advisory: a line is dropped while the client has not read the last ones.
          const result = await store.verify({
            ...options,
            onProgress: (p) => {
              if (res.destroyed) throw errors.closed()
              if (progress && !res.writableNeedDrain) write({ progress: p })
            }
          })
          await line({ result })
        })
      } else if (route === 'call' && req.method === 'POST' && CALLS.has(rest[0])) {
        const args = shaped(body, 'an array of arguments', [])
        if (rest[0] === 'info') return answer(res, { referenceId: store.referenceId, chunkSize: store.chunkSize, shardCapacity: store.shardCapacity, shardCount: store.shardCount, pid: process.pid })
        return answer(res, await store[rest[0]](...args))
      }
      throw errors.invalidValue('request', `${req.method} ${pathname} is not one this protocol serves`)
    } catch (err) {
      fail(res, err)
    }
  }

  // The answer to a request refused at the cap: 503, code EBUSY, this message. Its
  // connection is closed after it.
  #refusal () {
    return Object.assign(new Error(`the process holding the store (${process.pid}) is serving as many requests as it takes at once ` +
      `(${this.#connections.max}, from its descriptor limit): try again later`), { code: 'EBUSY' })
  }

  // A request's JSON body (undefined if empty), which the client must keep sending
  // (IDLE_MS).
  #json (req) {
    this.#idle(req)
    return jsonBody(req)
  }

  // The whole file or a range (Range: bytes=A-B), with its size and SHA-256 in headers:
  // those of the version the read reads. Headers go once the first bytes are read, so
  // that a failure to open (a range past the end, a file removed meanwhile) is its
  // status; a later one is the trailer. HEAD: the same headers, with the length in
  // content-length, and no body.
  async #sendFile (key, req, res) {
    const range = parseRange(req.headers.range)
    if (res.destroyed) return // the client went away: no read to open (and close)
    const stream = this.#store.createReadStream(key, { ...range, [SERVED]: true })
    res.once('close', () => stream.destroy())
    const chunks = stream[Symbol.asyncIterator]()
    let next
    try {
      next = await chunks.next()
    } catch (err) {
      stream.destroy()
      throw err
    }
    const { size, sha256, start, end } = stream[READING]
    const headers = { 'content-type': 'application/octet-stream', 'kfs-size': size, 'kfs-sha256': sha256 }
    if (range) headers['content-range'] = `bytes ${start}-${end}/${size}`
    if (req.method === 'HEAD') {
      stream.destroy()
      res.writeHead(range ? 206 : 200, { ...headers, 'content-length': Math.max(0, end - start + 1) })
      return res.end()
    }
    res.writeHead(range ? 206 : 200, { ...headers, trailer: ERROR_TRAILER })
    try {
      for (; !next.done; next = await chunks.next()) {
        if (!res.write(next.value)) await drained(res, this.#idleMs)
        if (res.destroyed) return
      }
    } catch (err) {
      res.addTrailers({ [ERROR_TRAILER]: JSON.stringify(encodeError(err)) })
    }
    res.end()
  }

  // A request whose body the client stops sending is ended (IDLE_MS). A body the
  // holder itself has stopped reading (bytes wait in it: a shard, the write budget or
  // LevelDB is slow) is not the client's doing: the wait starts again. Once the body
  // is in, the work it asked for takes what time it takes.
  #idle (req) {
    const cut = () => {
      if (req.readableLength > 0) req.setTimeout(this.#idleMs, cut)
      else req.destroy()
    }
    req.setTimeout(this.#idleMs, cut)
    req.once('end', () => req.setTimeout(0))
  }

  async #receive (key, query, req, res) {
    this.#idle(req)
    const options = { ...synced(query), [SERVED]: true }
    if (query.has('sha256')) options.sha256 = query.get('sha256')
    if (query.has('size')) options.size = Number(query.get('size'))
    const stream = this.#store.createWriteStream(key, options)
    await pipeline(req, stream)
    answer(res, { key: stream.key, size: stream.size, sha256: stream.sha256 })
  }
}

// The internal options of a write, if any: ?sync=1 asks that it be synced.
function synced (query) {
  return query.get('sync') === '1' ? { [SYNC]: true } : undefined
}

// A key as sent, URI-encoded.
function decoded (text) {
  try {
    return decodeURIComponent(text)
  } catch {
    throw errors.invalidValue('key', `is not URI-encoded: ${JSON.stringify(text.slice(0, 100))}`)
  }
}

function parseRange (header) {
  if (!header) return undefined
  const m = /^bytes=(\d+)-(\d*)$/.exec(header)
  if (!m) throw errors.invalidValue('Range', `must be bytes=start-[end], got ${JSON.stringify(header)}`)
  return m[2] === '' ? { start: Number(m[1]) } : { start: Number(m[1]), end: Number(m[2]) }
}

// A JSON body, or undefined if empty.
async function jsonBody (req) {
  const parts = []
  let size = 0
  for await (const part of req) {
    size += part.length
    if (size > MAX_JSON) throw errors.invalidValue('body', `is larger than ${MAX_JSON} bytes`)
    parts.push(part)
  }
  const text = Buffer.concat(parts).toString('utf8')
  if (!text) return undefined
  try {
    return JSON.parse(text)
  } catch {
    throw errors.invalidValue('body', 'is not JSON')
  }
}

// `body` if it is `what` (an object, or an array of arguments), `empty` if undefined;
// anything else is EINVAL.
function shaped (body, what, empty) {
  if (body === undefined) return empty
  if (Array.isArray(body) !== Array.isArray(empty) || body === null || typeof body !== 'object') {
    throw errors.invalidValue('body', `must be ${what} in JSON, got ${JSON.stringify(body).slice(0, 100)}`)
  }
  return body
}

function answer (res, result) {
  const body = JSON.stringify({ result: result === undefined ? null : result })
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) })
  res.end(body)
}

function fail (res, err) {
  if (res.headersSent) return res.destroy()
  const body = JSON.stringify({ error: encodeError(err) })
  const headers = { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) }
  if (err[NOT_DONE_HEADER]) headers[NOT_DONE_HEADER] = '1'
  res.writeHead(statusOf(err), headers)
  res.end(body)
}

// A body of JSON lines: produce(line, write) gets an async line(), whose lines go out
// LINES_BYTES at a time (a write per line would cost a listing of many files a system
// call each) and which waits while the client is behind (drained), and a write() that
// sends at once and does not wait. A failure ends the body with the error trailer.
async function lines (res, idleMs, produce) {
  res.writeHead(200, { 'content-type': 'application/x-ndjson', trailer: ERROR_TRAILER })
  let pending = ''
  const add = (value) => { pending += JSON.stringify(value) + '\n' }
  const flush = () => {
    const text = pending
    pending = ''
    return text ? res.write(text) : true
  }
  try {
    await produce(async (value) => {
      if (res.destroyed) throw errors.closed()
      add(value)
      if (pending.length >= LINES_BYTES && !flush()) await drained(res, idleMs)
    }, (value) => {
      add(value)
      return flush()
    })
    flush()
  } catch (err) {
    flush()
    res.addTrailers({ [ERROR_TRAILER]: JSON.stringify(encodeError(err)) })
  }
  res.end()
}

// Until the response can take more, or is closed: the client went away, or took
// nothing for idleMs (if given) and was cut off.
function drained (res, idleMs) {
  if (res.destroyed) return Promise.resolve()
  return new Promise((resolve) => {
    const timer = idleMs === undefined ? undefined : setTimeout(() => res.destroy(), idleMs).unref()
    const done = () => {
      clearTimeout(timer)
      res.off('drain', done)
      res.off('close', done)
      resolve()
    }
    res.on('drain', done)
    res.on('close', done)
  })
}

module.exports = { Holder }

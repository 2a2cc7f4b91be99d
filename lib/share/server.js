'use strict'

const fs = require('node:fs/promises')
const path = require('node:path')
const crypto = require('node:crypto')
const http = require('node:http')
const { pipeline } = require('node:stream/promises')
const { SOCKET, VERSION, ERROR_TRAILER, NOT_DONE_HEADER, CALLS, MAX_SOCKET_PATH, socketPath, encodeError } = require('./protocol')
const errors = require('../api/errors')
const { SERVED } = require('../api/args')
const { FORMAT_FILE } = require('../dir/format')
const { defaultConnections } = require('../dir/descriptors')
const { READING } = require('../data/streams')
const { Connections, httpOptions, HEADERS_MS, BACKLOG } = require('./connections')
const { synced, decoded, parseRange, jsonBody, shaped } = require('./requests')
const { answer, fail, lines, drained } = require('./answers')
const { free } = require('../base/freed')
// A client that takes no more of an answer, or sends nothing more of a request's body,
// for this long is cut off: what its request holds (a read, a shard lease, write
// budget) is given back.
const IDLE_MS = 60000
// The routes whose request body is JSON: until it is in, their request holds nothing.
const JSON_ROUTES = new Set(['verify', 'call'])

// The process that holds a store serves it to the others (protocol.js) on a Unix
// socket in the store's directory. Its lock makes it the only holder, so a socket found
// there at start is left by one that died, and is replaced. The socket may be reached
// by whoever may write the store's files: its owner, and its group where format.json is
// group-writable. Its connections are bounded by `maxConnections` (by default a share
// of the descriptor limit: descriptors.defaultConnections), as connections.js says; a
// request past them is refused (#refusal).
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
    const server = http.createServer(httpOptions(this.#headersMs), (req, res) => this.#request(req, res))
    server.maxConnections = this.#connections.accepted
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
        if (!res.write(next.value, sent(next.value))) await drained(res, this.#idleMs)
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

// A write callback that frees `chunk` once the socket wrote it: a chunk of a read the
// holder made is its own (the binding's copy of a record), and nothing else uses it.
function sent (chunk) {
  return (err) => {
    if (!err) free(chunk)
  }
}

module.exports = { Holder }

'use strict'

const fs = require('node:fs/promises')
const path = require('node:path')
const crypto = require('node:crypto')
const http = require('node:http')
const { pipeline } = require('node:stream/promises')
const { SOCKET, VERSION, NEWER, ERROR_TRAILER, CALL_HEADER, ROUTES, CALLS, MAX_SOCKET_PATH, socketPath, pathOf, routeOf } = require('./protocol')
const errors = require('../api/errors')
const { SERVED, COUNTED_AS } = require('../api/args')
const { metricsText, CONTENT_TYPE } = require('../api/prometheus')
const { FORMAT_FILE } = require('../dir/format')
const { defaultConnections } = require('../dir/descriptors')
const { READING } = require('../data/streams')
const { Connections, BACKLOG } = require('./connections')
const { synced, expiring, decoded, parseRange, jsonBody, shaped } = require('./requests')
const { answer, fail, lines } = require('./answers')
const { closingRefusal, busyRefusal, errorTrailer } = require('./failures')
const { IDLE_MS, HEADERS_MS, httpOptions, cutIdleBody, drained } = require('./timeouts')
const { free } = require('../base/freed')

// The process that holds a store serves it to the others (protocol.js) on a Unix
// socket in the store's directory. Its lock makes it the only holder, so a socket found
// there at start was left by one that died, and is replaced. Whoever may write the
// store's files may connect. At most `maxConnections` requests are served at once
// (connections.js; by default descriptors.defaultConnections).
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

  // Other processes' connections open now.
  get clients () {
    return this.#connections.open
  }

  // Resolves to whether the store is now shared: not where the socket path is too long
  // for Linux, nor when making the socket fails. The socket is bound in a private
  // directory of tmp/, given its mode, then renamed into place: never reachable with a
  // looser mode, and a stale one is replaced whole.
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
      // A failure to accept a connection (out of descriptors) is the client's.
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

  // Connecting takes write permission: the group's where it may write format.json and
  // the socket was made with it.
  async #mode (socket) {
    const [format, made] = await Promise.all([fs.stat(path.join(path.dirname(this.#file), FORMAT_FILE)), fs.stat(socket)])
    return format.mode & 0o020 && format.gid === made.gid ? 0o660 : 0o600
  }

  // Resolves once the requests it accepted ended (connections.js cuts off those whose
  // clients stall them), refusing every new one as not done. Then the socket is removed,
  // and the connections made before are answered the same way.
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
    if (this.#closing || this.#store.status === 'closing') throw closingRefusal()
  }

  // Throws the refusal of a request past those served at once; its connection closes.
  #serve (req, res) {
    if (this.#connections.serve(req, res)) return
    res.shouldKeepAlive = false
    throw busyRefusal(process.pid, this.#connections.max)
  }

  async #handle (req, res) {
    // The path as sent: a URL parser would drop the key `.` or `..`.
    const [pathname, search = ''] = req.url.split(/\?(.*)/s)
    const { versioned, params } = pathOf(pathname)
    const route = routeOf(req.method, pathname)
    const unknown = () => errors.invalidValue('request', `${req.method} ${pathname} is not one this protocol serves`)
    try {
      // Refused before anything is done, its body unread, while closing or at the cap. A
      // JSON body is read first (it holds nothing meanwhile), and both checked again
      // after it. Writes call the store in this turn, which admits them.
      this.#admit()
      if (!route && !versioned) throw errors.invalidValue('path', `${pathname} is not a path of this protocol (${[VERSION, ...Object.keys(NEWER)].join('/..., ')}/... or /metrics)`)
      const json = Boolean(route && ROUTES[route].json)
      if (!json) this.#serve(req, res)
      if (req.headers.expect === '100-continue') res.writeContinue()
      const body = json ? await this.#json(req) : undefined
      if (json) {
        this.#admit()
        this.#serve(req, res)
      }
      if (!route) throw unknown()
      await this.#routes[route]({ req, res, query: new URLSearchParams(search), params, body, unknown })
    } catch (err) {
      fail(res, err)
    }
  }

  // How the holder serves each route (protocol.js).
  #routes = {
    read: ({ req, res, params }) => this.#sendFile(decoded(params.join('/')), req, res),
    write: ({ req, res, params, query }) => this.#receive(decoded(params.join('/')), query, req, res),
    unlink: async ({ res, params, query }) => answer(res, await this.#store.unlink(decoded(params.join('/')), synced(query))),
    put: async ({ req, res, query }) => {
      cutIdleBody(req, this.#idleMs)
      answer(res, await this.#store.put(req, expiring(query, { ...synced(query) })))
    },
    list: ({ res, query }) => {
      const shard = query.get('shard')
      const only = shard === null ? undefined : shard === '' || !/^\d+$/.test(shard) ? shard : Number(shard)
      // No idle cut: a listing holds no shard while its client reads slowly.
      return lines(res, undefined, async (line) => { for await (const file of this.#store.list(only, { [SERVED]: true })) await line(file) })
    },
    verify: ({ res, body }) => this.#verify(res, body),
    call: ({ res, params, body, query, unknown }) => {
      if (!CALLS.has(params[0])) throw unknown()
      const args = shaped(body, 'an array of arguments', [])
      // trash's internal options (args.SYNC) after its key, as unlink's.
      if (params[0] === 'trash' && args.length === 1) args.push(synced(query))
      return this.#call(res, params[0], args)
    },
    metrics: async ({ res }) => {
      const body = metricsText(await this.#store.metrics())
      res.writeHead(200, { 'content-type': CONTENT_TYPE, 'content-length': Buffer.byteLength(body) })
      res.end(body)
    }
  }

  #verify (res, body) {
    const { progress, ...options } = shaped(body, 'an object', {})
    return lines(res, this.#idleMs, async (line, write) => {
      // Always given: it ends the check once the client went away. Progress is
      // advisory: a line is dropped while the client has not read the last ones.
      const result = await this.#store.verify({
        ...options,
        onProgress: (p) => {
          if (res.destroyed) throw errors.closed()
          if (progress && !res.writableNeedDrain) write({ progress: p })
        }
      })
      await line({ result })
    })
  }

  async #call (res, method, args) {
    const store = this.#store
    if (method === 'info') return answer(res, { referenceId: store.referenceId, chunkSize: store.chunkSize, shardCapacity: store.shardCapacity, shardCount: store.shardCount, pid: process.pid })
    answer(res, await store[method](...args))
  }

  // A request's JSON body (undefined if empty).
  #json (req) {
    cutIdleBody(req, this.#idleMs)
    return jsonBody(req)
  }

  // The whole file or a range. Headers, those of the version read, go once the first
  // bytes are read, so that a failure to open (a range past the end, a file removed
  // meanwhile) is its status; a later one is the trailer.
  async #sendFile (key, req, res) {
    const range = parseRange(req.headers.range)
    if (res.destroyed) return // the client went away: no read to open (and close)
    const stream = this.#store.createReadStream(key, { ...range, [SERVED]: true, [COUNTED_AS]: countedAs(req, 'readFile') })
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
      res.addTrailers(errorTrailer(err))
    }
    res.end()
  }

  async #receive (key, query, req, res) {
    cutIdleBody(req, this.#idleMs)
    const options = expiring(query, { ...synced(query), [SERVED]: true, [COUNTED_AS]: countedAs(req, 'writeFile') })
    if (query.has('sha256')) options.sha256 = query.get('sha256')
    if (query.has('size')) options.size = Number(query.get('size'))
    const stream = this.#store.createWriteStream(key, options)
    await pipeline(req, stream)
    answer(res, { key: stream.key, size: stream.size, sha256: stream.sha256 })
  }
}

// `method` if the client says it called it (CALL_HEADER), else undefined: the stream's own name.
// Taken on the client's word: it can only name its own request's method, of two.
function countedAs (req, method) {
  return req.headers[CALL_HEADER] === method ? method : undefined
}

// A write callback that frees `chunk` once the socket wrote it: a chunk of a read the
// holder made is its own (the binding's copy of a record), and nothing else uses it.
function sent (chunk) {
  return (err) => {
    if (!err) free(chunk)
  }
}

// A holder removes its socket before it releases the store, so a socket found by the
// process that now holds the store was left by one that ended without closing it (killed,
// crashed). Removed whether or not this process shares the store (listen() would replace
// it), so that only one open finds it: resolves to whether one did.
async function removeStaleSocket (dir) {
  const socket = socketPath(dir)
  const stat = await fs.lstat(socket).catch(() => undefined)
  if (!stat || !stat.isSocket()) return false
  await fs.rm(socket, { force: true })
  return true
}

module.exports = { Holder, removeStaleSocket }

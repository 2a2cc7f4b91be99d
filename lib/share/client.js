'use strict'

const http = require('node:http')
const { pipeline } = require('node:stream')
const { once } = require('node:events')
const { StringDecoder } = require('node:string_decoder')
const { VERSION, ERROR_TRAILER, NOT_DONE_HEADER, decodeError } = require('./protocol')

const errors = require('../api/errors')
const { NOT_DONE, UNSENT, CLOSING, notDone, lost } = require('./failures')

// How long a holder may take to answer a new client before the store counts as in use
// by a process that does not share it (EBUSY).
const CONNECT_MS = 5000

// A store held by another process, reached through its socket (server.js): the same
// calls as a Store opened here, answered by the holder. Each request has a connection
// of its own, which nothing keeps open between requests. A request that loses its
// holder (ECONNRESET) calls onLost(this) first. A body (a write's, a put's Readable)
// is sent only once connected, so that a holder that was not there leaves it unread.
class Remote {
  #socket
  #onLost
  #requests = new Set()

  constructor (socket, onLost = () => {}) {
    this.#socket = socket
    this.#onLost = onLost
  }

  // Resolves to a Remote once the holder answered, or rejects (no holder there, or one
  // that does not answer within `timeout` ms).
  static async connect (socket, { timeout = CONNECT_MS, onLost } = {}) {
    const remote = new Remote(socket, onLost)
    remote.info = await remote.#call('info', [], { timeout })
    return remote
  }

  // Ends every request still open (a listing a caller stopped reading).
  close () {
    for (const req of this.#requests) req.destroy()
  }

  // A request, tracked until its response ended. `continued`: its body, which cannot be
  // sent twice, waits for the holder's 100 Continue, which it sends once it took the
  // request: a holder that is closing refuses it before.
  #open (options, continued = false) {
    const headers = continued ? { ...options.headers, expect: '100-continue' } : options.headers
    const req = http.request({ socketPath: this.#socket, agent: false, ...options, headers })
    this.#requests.add(req)
    req.once('close', () => this.#requests.delete(req))
    if (continued) req.flushHeaders()
    return req
  }

  // `err` as the caller sees it (lost()), noting a lost holder.
  #failed (err) {
    const seen = lost(err)
    if (seen !== err) this.#onLost(this)
    return seen
  }

  // Resolves to the response once its headers came; a failure status rejects with the
  // holder's error. A Readable body is piped once the holder took the request (HTTP's
  // 100 Continue), and its failure is the request's; a refusal before leaves it unread
  // (UNSENT), so that the call can be made again.
  #request (method, path, { headers, body, timeout } = {}) {
    return new Promise((resolve, reject) => {
      const streamed = body !== undefined && typeof body.pipe === 'function'
      const req = this.#open({ method, path: VERSION + path, headers }, streamed)
      let piped = false
      // The body's own failure (a file it reads, say) is the caller's, as it is.
      let source
      const keep = (err) => { source = source || err }
      const failed = (err) => {
        if (streamed && !piped) body.off('error', keep)
        reject(!piped && err[NOT_DONE] ? Object.assign(err, { [UNSENT]: true }) : err)
      }
      req.once('error', (err) => failed(this.#failed(err)))
      if (timeout) req.setTimeout(timeout, () => req.destroy(Object.assign(new Error(`no answer within ${timeout} ms`), { timedOut: true, syscall: 'connect' })))
      req.once('response', (res) => {
        req.setTimeout(0)
        if (res.statusCode < 400) return resolve(res)
        readAll(res).then((text) => failed(this.#answered(res, text)), (err) => failed(this.#failed(err)))
      })
      if (!streamed) return req.end(body)
      body.once('error', keep)
      req.once('continue', () => {
        piped = true
        pipeline(body, req, (err) => { if (err) reject(err === source || !err.syscall ? err : this.#failed(err)) })
      })
    })
  }

  call (method, ...args) {
    return this.#call(method, args)
  }

  async #call (method, args, { timeout } = {}) {
    const res = await this.#request('POST', `/call/${method}`, { timeout, body: JSON.stringify(args), headers: { 'content-type': 'application/json' } })
    return JSON.parse(await readAll(res)).result
  }

  async stat (key) {
    const stat = await this.call('stat', key)
    return { ...stat, mtime: new Date(stat.mtime) }
  }

  async readFile (key) {
    const res = await this.#request('GET', `/files/${encodeURIComponent(key)}`)
    const parts = []
    for await (const part of this.#guarded(res)) parts.push(part)
    return Buffer.concat(parts)
  }

  // `sync`: the holder syncs the write, whether or not its store is synced.
  async writeFile (key, data, { sync } = {}) {
    await this.#written(key, data, { sync })
  }

  async put (data, { sync } = {}) {
    const res = await this.#request('POST', `/put${sync ? '?sync=1' : ''}`, { body: data })
    return JSON.parse(await readAll(res)).result
  }

  async unlink (key, { sync } = {}) {
    const res = await this.#request('DELETE', `/files/${encodeURIComponent(key)}${sync ? '?sync=1' : ''}`)
    await readAll(res)
  }

  // A reader for ReadStream (data/streams.js): read() resolves to the next chunk, or
  // undefined at the end; close() stops.
  async openReader (key, range) {
    const headers = range ? { range: `bytes=${range.start || 0}-${range.end === undefined ? '' : range.end}` } : {}
    const res = await this.#request('GET', `/files/${encodeURIComponent(key)}`, { headers })
    const chunks = this.#guarded(res)[Symbol.asyncIterator]()
    return {
      read: async () => (await chunks.next()).value,
      close: async () => res.destroy()
    }
  }

  // A writer for WriteStream: the body of one PUT, committed when it ends. Resolves once
  // the holder took the request (`continued`: see #open), or else once connected.
  async openWriter (key, { expectedSha256, size, sync, continued = true } = {}) {
    const query = new URLSearchParams()
    if (expectedSha256 !== undefined) query.set('sha256', expectedSha256)
    if (size !== undefined) query.set('size', String(size))
    if (sync) query.set('sync', '1')
    let req
    let failure
    const response = new Promise((resolve, reject) => {
      req = this.#open({ method: 'PUT', path: `${VERSION}/files/${encodeURIComponent(key)}?${query}` }, continued)
      req.once('error', (err) => reject(this.#failed(err)))
      req.once('response', (res) => {
        readAll(res).then((text) => (res.statusCode < 400 ? resolve(JSON.parse(text).result) : reject(this.#answered(res, text))), (err) => reject(this.#failed(err)))
      })
    })
    response.catch((err) => { failure = failure || err })
    await Promise.race([continued ? once(req, 'continue') : connected(req), response])
    return {
      write: (chunk) => {
        if (failure) return Promise.reject(failure)
        if (req.write(chunk)) return Promise.resolve()
        return new Promise((resolve, reject) => {
          const onDrain = () => resolve()
          req.once('drain', onDrain)
          response.then(() => { req.off('drain', onDrain); resolve() }, (err) => { req.off('drain', onDrain); reject(err) })
        })
      },
      finish: () => {
        req.end()
        return response
      },
      abort: async () => {
        req.destroy()
        await response.catch(() => {})
      }
    }
  }

  // A buffer can be sent again: it does not wait for 100 Continue.
  async #written (key, data, options) {
    const writer = await this.openWriter(key, { ...options, continued: false })
    try {
      await writer.write(data)
    } catch (err) {
      await writer.abort()
      throw err
    }
    return writer.finish()
  }

  async * list (shard) {
    const res = await this.#request('GET', `/list${shard === undefined ? '' : `?shard=${shard}`}`)
    yield * this.#lines(res)
  }

  async verify (options = {}) {
    const { onProgress, ...rest } = options
    const res = await this.#request('POST', '/verify', { body: JSON.stringify({ ...rest, progress: Boolean(onProgress) }), headers: { 'content-type': 'application/json' } })
    try {
      for await (const line of this.#lines(res)) {
        if (line.result) return line.result
        onProgress(line.progress)
      }
    } finally {
      res.destroy()
    }
    throw errors.system('the store\'s holder', { code: 'EIO', message: 'its answer to verify ended without a result' })
  }

  // The body's chunks; its end raises the error the holder put in its trailer.
  async * #guarded (res) {
    try {
      for await (const chunk of res) yield chunk
    } catch (err) {
      throw this.#failed(err)
    }
    const trailer = res.trailers[ERROR_TRAILER]
    if (trailer) throw this.#holderError(decodeError(JSON.parse(trailer)))
    if (!res.complete) throw this.#failed(new Error('the answer ended early'))
  }

  async * #lines (res) {
    const decoder = new StringDecoder('utf8') // a character may be split between chunks
    let rest = ''
    for await (const chunk of this.#guarded(res)) {
      const text = rest + decoder.write(chunk)
      const parts = text.split('\n')
      rest = parts.pop()
      for (const line of parts) if (line) yield JSON.parse(line)
    }
  }

  // The error of a failure status. A refusal (NOT_DONE_HEADER: the holder did nothing)
  // is NOT_DONE and UNSENT: that of a holder serving as many requests as it takes is its
  // EBUSY; that of a holder that is closing, CLOSING.
  #answered (res, text) {
    let err
    try {
      err = decodeError(JSON.parse(text).error)
    } catch {
      err = errors.system('the store\'s holder', { code: 'EIO', message: `answered ${res.statusCode}: ${text.slice(0, 200)}` })
    }
    if (!res.headers[NOT_DONE_HEADER]) return this.#holderError(err)
    if (err.code === 'EBUSY') return Object.assign(err, { [NOT_DONE]: true, [UNSENT]: true })
    this.#onLost(this)
    return Object.assign(notDone('it is closing, and did not carry out the call'), { [CLOSING]: true })
  }

  // The holder's store closing under a request it had taken is the holder going away,
  // not this store closing: the request may or may not have been carried out.
  #holderError (err) {
    return err.code === 'ECLOSED' ? this.#failed(Object.assign(new Error(err.message), { syscall: 'read' })) : err
  }
}

// Resolves once the request's connection is made; rejects if it fails (the request's
// own 'error' handler reports how).
function connected (req) {
  return new Promise((resolve, reject) => {
    req.once('error', reject)
    req.once('socket', (socket) => {
      if (!socket.connecting) return resolve()
      socket.once('connect', () => {
        req.off('error', reject)
        resolve()
      })
    })
  })
}

async function readAll (res) {
  const parts = []
  for await (const part of res) parts.push(part)
  return Buffer.concat(parts).toString('utf8')
}

module.exports = { Remote, CONNECT_MS }

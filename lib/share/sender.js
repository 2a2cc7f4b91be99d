'use strict'

const http = require('node:http')
const { pipeline } = require('node:stream')
const { once } = require('node:events')
const { StringDecoder } = require('node:string_decoder')
const { requestOf } = require('./protocol')
const { NOT_DONE, UNSENT, GONE, lost, answered, trailerError } = require('./failures')

// A client's requests to the holder (client.js), each on a connection of its own that
// nothing keeps open after it; its failures as failures.js reads them, onLost() called
// for one that says the holder is gone. A body is sent only once connected, so that a
// holder that was not there leaves it unread.
class Sender {
  #socket
  #onLost
  #requests = new Set()

  constructor (socket, onLost) {
    this.#socket = socket
    this.#onLost = onLost
  }

  close () {
    for (const req of this.#requests) req.destroy()
  }

  // Resolves to the response once its headers came; a failure status rejects. A Readable
  // body is piped once the holder took the request (HTTP's 100 Continue): a refusal
  // before leaves it unread (UNSENT), and the call can be made again.
  request (route, param, { query, headers, body, timeout } = {}) {
    return new Promise((resolve, reject) => {
      const streamed = body !== undefined && typeof body.pipe === 'function'
      const req = this.#open(route, param, query, headers, streamed)
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
        readAll(res).then((text) => failed(this.#answered(req, res, text)), (err) => failed(this.#failed(err)))
      })
      if (!streamed) return req.end(body)
      body.once('error', keep)
      req.once('continue', () => {
        piped = true
        pipeline(body, req, (err) => { if (err) reject(err === source || !err.syscall ? err : this.#failed(err)) })
      })
    })
  }

  // A request whose body is written as it comes: write(chunk), finish() (resolves to the
  // holder's result), abort(). Resolves once the holder took the request (`continued`:
  // see #open), or else once connected.
  async upload (route, param, query, continued, headers) {
    let failure
    const req = this.#open(route, param, query, headers, continued)
    const response = new Promise((resolve, reject) => {
      req.once('error', (err) => reject(this.#failed(err)))
      req.once('response', (res) => {
        readAll(res).then((text) => (res.statusCode < 400 ? resolve(JSON.parse(text).result) : reject(this.#answered(req, res, text))), (err) => reject(this.#failed(err)))
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

  // The body's chunks; its end raises the error the holder put in its trailer.
  async * guarded (res) {
    try {
      for await (const chunk of res) yield chunk
    } catch (err) {
      throw this.#failed(err)
    }
    const err = trailerError(res.trailers)
    if (err) throw this.#seen(err)
    if (!res.complete) throw this.#failed(new Error('the answer ended early'))
  }

  async * lines (res) {
    const decoder = new StringDecoder('utf8') // a character may be split between chunks
    let rest = ''
    for await (const chunk of this.guarded(res)) {
      const text = rest + decoder.write(chunk)
      const parts = text.split('\n')
      rest = parts.pop()
      for (const line of parts) if (line) yield JSON.parse(line)
    }
  }

  // A request, tracked until it closed. `continued`: its body, which cannot be sent
  // twice, waits for the holder's 100 Continue, which it sends once it took the request:
  // a holder that is closing refuses it before.
  #open (route, param, query, headers, continued) {
    const { method, path } = requestOf(route, param, query)
    // An IPv4 literal as Host: Node's agent tests the host with isIP(), and any other
    // name ('localhost') reaches isIPv6(), whose regular expression costs a short command
    // about 7 ms of CPU to compile.
    const all = { host: '127.0.0.1', ...headers, ...(continued ? { expect: '100-continue' } : {}) }
    const req = http.request({ socketPath: this.#socket, agent: false, method, path, headers: all })
    this.#requests.add(req)
    req.once('close', () => this.#requests.delete(req))
    if (continued) req.flushHeaders()
    return req
  }

  #failed (err) {
    return this.#seen(lost(err))
  }

  #answered (req, res, text) {
    return this.#seen(answered(res.statusCode, res.headers, text, req.path))
  }

  #seen (err) {
    if (err[GONE]) this.#onLost()
    return err
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

module.exports = { Sender, readAll }

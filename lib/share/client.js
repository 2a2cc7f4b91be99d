'use strict'

const http = require('node:http')
const { pipeline } = require('node:stream')
const { StringDecoder } = require('node:string_decoder')
const { VERSION, ERROR_TRAILER, decodeError } = require('./protocol')

// How long a holder may take to answer a new client before the store counts as in use
// by a process that does not share it (EBUSY).
const CONNECT_MS = 5000
const errors = require('../api/errors')

// A store held by another process, reached through its socket (server.js): the same
// calls as a Store opened here, answered by the holder. Each request has a connection
// of its own, which nothing keeps open between requests.
class Remote {
  #socket

  constructor (socket, info) {
    this.#socket = socket
    this.info = info
  }

  // Resolves to a Remote once the holder answered, or rejects (no holder there, or one
  // that does not answer within CONNECT_MS).
  static async connect (socket) {
    const remote = new Remote(socket)
    remote.info = await remote.#call('info', [], { timeout: CONNECT_MS })
    return remote
  }

  // Resolves to the response once its headers came; a failure status rejects with the
  // holder's error. A Readable body is piped, and its failure is the request's.
  #request (method, path, { headers, body, timeout } = {}) {
    return new Promise((resolve, reject) => {
      const req = http.request({ socketPath: this.#socket, method, path: VERSION + path, headers, agent: false })
      req.once('error', (err) => reject(lost(err)))
      if (timeout) req.setTimeout(timeout, () => req.destroy(Object.assign(new Error(`no answer within ${timeout} ms`), { syscall: 'connect' })))
      req.once('response', (res) => {
        req.setTimeout(0)
        if (res.statusCode < 400) return resolve(res)
        readAll(res).then((text) => reject(responseError(res, text)), (err) => reject(lost(err)))
      })
      if (body === undefined) req.end()
      else if (typeof body.pipe === 'function') pipeline(body, req, (err) => { if (err) reject(err.syscall ? lost(err) : err) })
      else req.end(body)
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
    const res = await this.#request('GET', `/files/${encodeURIComponent(key.toWellFormed())}`)
    const parts = []
    for await (const part of guarded(res)) parts.push(part)
    return Buffer.concat(parts)
  }

  async writeFile (key, data) {
    await this.#written(key, data, {})
  }

  async put (data) {
    const res = await this.#request('POST', '/put', { body: data })
    return JSON.parse(await readAll(res)).result
  }

  // A reader for ReadStream (data/streams.js): read() resolves to the next chunk, or
  // undefined at the end; close() stops.
  async openReader (key, range) {
    const headers = range ? { range: `bytes=${range.start || 0}-${range.end === undefined ? '' : range.end}` } : {}
    const res = await this.#request('GET', `/files/${encodeURIComponent(key.toWellFormed())}`, { headers })
    const chunks = guarded(res)[Symbol.asyncIterator]()
    return {
      read: async () => (await chunks.next()).value,
      close: async () => res.destroy()
    }
  }

  // A writer for WriteStream: the body of one PUT, committed when it ends.
  async openWriter (key, { expectedSha256, size } = {}) {
    const query = new URLSearchParams()
    if (expectedSha256 !== undefined) query.set('sha256', expectedSha256)
    if (size !== undefined) query.set('size', String(size))
    let req
    let failure
    const response = new Promise((resolve, reject) => {
      req = http.request({ socketPath: this.#socket, method: 'PUT', path: `${VERSION}/files/${encodeURIComponent(key.toWellFormed())}?${query}`, agent: false })
      req.once('error', (err) => reject(lost(err)))
      req.once('response', (res) => {
        readAll(res).then((text) => (res.statusCode < 400 ? resolve(JSON.parse(text).result) : reject(responseError(res, text))), (err) => reject(lost(err)))
      })
    })
    response.catch((err) => { failure = failure || err })
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

  async #written (key, data, options) {
    const writer = await this.openWriter(key, options)
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
    yield * jsonLines(res)
  }

  async verify (options = {}) {
    const { onProgress, ...rest } = options
    const res = await this.#request('POST', '/verify', { body: JSON.stringify({ ...rest, progress: Boolean(onProgress) }), headers: { 'content-type': 'application/json' } })
    try {
      for await (const line of jsonLines(res)) {
        if (line.result) return line.result
        onProgress(line.progress)
      }
    } finally {
      res.destroy()
    }
    throw errors.system('the store\'s holder', { code: 'EIO', message: 'its answer to verify ended without a result' })
  }
}

// The body's chunks; its end raises the error the holder put in its trailer.
async function * guarded (res) {
  try {
    for await (const chunk of res) yield chunk
  } catch (err) {
    throw lost(err)
  }
  const trailer = res.trailers[ERROR_TRAILER]
  if (trailer) throw decodeError(JSON.parse(trailer))
  if (!res.complete) throw lost(new Error('the answer ended early'))
}

async function * jsonLines (res) {
  const decoder = new StringDecoder('utf8') // a character may be split between chunks
  let rest = ''
  for await (const chunk of guarded(res)) {
    const text = rest + decoder.write(chunk)
    const parts = text.split('\n')
    rest = parts.pop()
    for (const line of parts) if (line) yield JSON.parse(line)
  }
}

async function readAll (res) {
  const parts = []
  for await (const part of res) parts.push(part)
  return Buffer.concat(parts).toString('utf8')
}

function responseError (res, text) {
  let err
  try {
    err = decodeError(JSON.parse(text).error)
  } catch {
    return errors.system('the store\'s holder', { code: 'EIO', message: `answered ${res.statusCode}: ${text.slice(0, 200)}` })
  }
  // The holder's store closing is the holder going away, not this store closing.
  return err.code === 'ECLOSED' ? lost(Object.assign(new Error(err.message), { syscall: 'read' })) : err
}

// The connection to the holder failed (a system error: it went away, closed or
// crashed, or never was): ECONNRESET, whatever the socket said, as the request may or
// may not have been carried out. kfs's own errors pass.
function lost (err) {
  // Node's own 'aborted' and 'socket hang up' (ECONNRESET) and parser errors (HPE_*)
  // carry no syscall either.
  if (!err.syscall && err.code && err.code !== 'ECONNRESET' && !String(err.code).startsWith('HPE_')) return err
  return errors.system('the process holding the store', { code: 'ECONNRESET', message: `could not be reached or went away: ${err.message}` })
}

module.exports = { Remote }

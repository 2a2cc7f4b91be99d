'use strict'

const errors = require('../api/errors')
const { ERROR_TRAILER, NOT_DONE_HEADER, encodeError, statusOf } = require('./protocol')

// How the holder (server.js) answers (protocol.js): a JSON result, a failure's status
// and JSON body, or a body of JSON lines ended by the error trailer if it fails.

// JSON lines are sent in writes of about this many bytes.
const LINES_BYTES = 16384

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

module.exports = { answer, fail, lines, drained }

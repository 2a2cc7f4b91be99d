'use strict'

const errors = require('../api/errors')
const { ERROR_TRAILER } = require('./protocol')
const { failureAnswer, errorTrailer } = require('./failures')
const { drained } = require('./timeouts')

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
  const { status, headers, body } = failureAnswer(err)
  res.writeHead(status, headers)
  res.end(body)
}

// A body of JSON lines: produce(line, write) gets an async line(), whose lines go out
// LINES_BYTES at a time (not a system call each) and which waits while the client is
// behind, and a write() that sends at once. A failure ends it with the error trailer.
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
    res.addTrailers(errorTrailer(err))
  }
  res.end()
}

module.exports = { answer, fail, lines }

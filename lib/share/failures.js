'use strict'

const errors = require('../api/errors')
const { ERROR_TRAILER, NOT_DONE_HEADER, newerNeeds } = require('./protocol')

// Errors crossing the socket, both ways: how the holder (server.js) sends a failure and
// how a client (sender.js) reads it, or a failure of the connection, and what each
// tells of the call.

// On a client's error: NOT_DONE, the holder was not reached, or did nothing of the call
// (it was closing, or at its cap). UNSENT (with NOT_DONE): it read nothing of the body,
// so a Readable can be sent again. CLOSING (with NOT_DONE): the store is free once the
// holder closed. GONE: the holder went away or is going, and its client forgets it.
const NOT_DONE = Symbol('kfs.notDone')
const UNSENT = Symbol('kfs.unsent')
const CLOSING = Symbol('kfs.closing')
const GONE = Symbol('kfs.gone')
// On an error the holder answers: it did nothing of the request (NOT_DONE_HEADER).
const REFUSED = Symbol('kfs.refused')

const STATUS = {
  EINVAL: 400,
  EROFS: 403,
  ENOENT: 404,
  EEXIST: 409,
  EBUSY: 503,
  ECLOSED: 503,
  ENOSPC: 507,
  EDQUOT: 507
}

// Properties of kfs errors (index.d.ts, KfsError) carried across.
const PROPS = ['argument', 'key', 'fileName', 'path', 'shard', 'shards', 'needed', 'free', 'disk', 'chunk', 'expected', 'found', 'supported', 'written', 'size']

function encodeError (err) {
  const out = { code: err.code || 'EIO', message: err.message, name: err.name }
  for (const prop of PROPS) if (err[prop] !== undefined) out[prop] = err[prop]
  return out
}

function decodeError (data) {
  const Class = data.name === 'TypeError' ? TypeError : data.name === 'RangeError' ? RangeError : Error
  const err = new Class(data.message)
  err.code = data.code
  for (const prop of PROPS) if (data[prop] !== undefined) err[prop] = data[prop]
  return err
}

function closingRefusal () {
  return Object.assign(errors.closed(), { [REFUSED]: true })
}

// The refusal of a request past the `max` the holder `pid` serves at once.
function busyRefusal (pid, max) {
  return Object.assign(new Error(`the process holding the store (${pid}) is serving as many requests as it takes at once ` +
    `(${max}, from its descriptor limit): try again later`), { code: 'EBUSY', [REFUSED]: true })
}

// A failure's status, headers and body, before a body was under way.
function failureAnswer (err) {
  const body = JSON.stringify({ error: encodeError(err) })
  const headers = { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) }
  if (err[REFUSED]) headers[NOT_DONE_HEADER] = '1'
  return { status: STATUS[err.code] || 500, headers, body }
}

function errorTrailer (err) {
  return { [ERROR_TRAILER]: JSON.stringify(encodeError(err)) }
}

// `cause`: the socket's own error.
function notDone (message, { unsent = false, cause } = {}) {
  const err = errors.system('the process holding the store', { code: 'ECONNRESET', message })
  if (cause) err.cause = cause
  return Object.assign(err, { [NOT_DONE]: true, [GONE]: true }, unsent && { [UNSENT]: true })
}

// A failure of the connection to the holder is ECONNRESET, whatever the socket said: one
// never made (ENOENT, ECONNREFUSED) sent nothing (UNSENT); once made, the request may or
// may not have been carried out. kfs's own errors pass.
function lost (err) {
  // Node's own 'aborted' and 'socket hang up' (ECONNRESET) and parser errors (HPE_*)
  // carry no syscall either.
  if (!err.syscall && err.code && err.code !== 'ECONNRESET' && !String(err.code).startsWith('HPE_')) return err
  if (err.syscall === 'connect') return notDone(`could not be reached: ${err.message}`, { unsent: true, cause: err })
  const gone = errors.system('the process holding the store', { code: 'ECONNRESET', message: `went away: ${err.message}` })
  return Object.assign(gone, { [GONE]: true })
}

// The error of a failure answer to a request sent on `sentPath`. A refusal is NOT_DONE
// and UNSENT: at the cap, the holder's EBUSY; while closing, CLOSING. An older holder's
// EINVAL naming the path of a request on a newer version (protocol.js) is ENOTSUP.
function answered (status, headers, text, sentPath) {
  let err
  try {
    err = decodeError(JSON.parse(text).error)
  } catch {
    err = errors.system('the store\'s holder', { code: 'EIO', message: `answered ${status}: ${text.slice(0, 200)}` })
  }
  const needs = err.code === 'EINVAL' && err.argument === 'path' ? newerNeeds(sentPath) : undefined
  if (needs) return errors.olderHolder(needs.version, needs.keys)
  if (!headers[NOT_DONE_HEADER]) return holderError(err)
  if (err.code === 'EBUSY') return Object.assign(err, { [NOT_DONE]: true, [UNSENT]: true })
  return Object.assign(notDone('it is closing, and did not carry out the call'), { [CLOSING]: true })
}

function trailerError (trailers) {
  const trailer = trailers[ERROR_TRAILER]
  return trailer ? holderError(decodeError(JSON.parse(trailer))) : undefined
}

// The holder's store closing under a request it had taken is the holder going away,
// not this store closing: the request may or may not have been carried out.
function holderError (err) {
  return err.code === 'ECLOSED' ? lost(Object.assign(new Error(err.message), { syscall: 'read' })) : err
}

module.exports = {
  NOT_DONE,
  UNSENT,
  CLOSING,
  GONE,
  closingRefusal,
  busyRefusal,
  failureAnswer,
  errorTrailer,
  lost,
  answered,
  trailerError
}

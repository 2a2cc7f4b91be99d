'use strict'

const errors = require('../api/errors')

// What a failure of a call made through a holder means (client.js), and whether the
// call is made again through the next holder (Store#opened).

// On an error from a Remote: the call was certainly not carried out. NOT_DONE: the
// holder could not be reached, or answered that it did nothing (it was closing, or
// serving as many requests as it takes), so the call may be made again wherever it can
// be. UNSENT (which implies NOT_DONE): the
// holder read nothing of the call's body (it never connected, or refused the call
// before its 100 Continue), so a body that can be read once can be sent again.
const NOT_DONE = Symbol('kfs.notDone')
const UNSENT = Symbol('kfs.unsent')
// With NOT_DONE: the holder refused the call because it is closing: the store is free
// once it closed.
const CLOSING = Symbol('kfs.closing')

// `cause`: the socket's own error.
function notDone (message, { unsent = false, cause } = {}) {
  const err = errors.system('the process holding the store', { code: 'ECONNRESET', message })
  if (cause) err.cause = cause
  err[NOT_DONE] = true
  if (unsent) err[UNSENT] = true
  return err
}

// The connection to the holder failed (a system error: it went away, closed or
// crashed, or never was): ECONNRESET, whatever the socket said. A connection that was
// never made (no socket, or none listening: ENOENT, ECONNREFUSED) sent nothing
// (UNSENT); once made, the request may or may not have been carried out. kfs's own
// errors pass.
function lost (err) {
  // Node's own 'aborted' and 'socket hang up' (ECONNRESET) and parser errors (HPE_*)
  // carry no syscall either.
  if (!err.syscall && err.code && err.code !== 'ECONNRESET' && !String(err.code).startsWith('HPE_')) return err
  if (err.syscall === 'connect') return notDone(`could not be reached: ${err.message}`, { unsent: true, cause: err })
  return errors.system('the process holding the store', { code: 'ECONNRESET', message: `went away: ${err.message}` })
}

// How a call through a holder may be made again once its holder went away (#opened):
// by default, only if NOT_DONE; IDEMPOTENT, after any loss (a second attempt ends as
// the first would have); NOT_SENT, only if UNSENT (its body is a Readable); NEVER.
const IDEMPOTENT = 'idempotent'
const NOT_SENT = 'unsent'
const NEVER = 'never'

// Whether a call that failed with `err` is made again, given its `retry`. Only a
// refusal of a holder serving as many requests as it takes (client.js: its own EBUSY)
// is NOT_DONE without being ECONNRESET.
function again (err, retry) {
  if (retry === NEVER) return false
  if (err[NOT_DONE]) return retry !== NOT_SENT || Boolean(err[UNSENT])
  return err.code === 'ECONNRESET' && retry === IDEMPOTENT
}

module.exports = { NOT_DONE, UNSENT, CLOSING, notDone, lost, IDEMPOTENT, NOT_SENT, NEVER, again }

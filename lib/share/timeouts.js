'use strict'

const { setTimeout: delay } = require('node:timers/promises')

// Every time rule of the socket's connections, with its default, as doc/api.md ("One
// store, many processes", its table) gives them.

// A client: a holder that does not answer a new one within CONNECT_MS is taken for one
// that does not share (EBUSY); a call is made again until CONNECT_MS after its first
// failure (lib/store/backends.js), every RETRY_MS to twice that (clients that lost one
// holder do not all try at once), each connect given at least CONNECT_FLOOR_MS.
const CONNECT_MS = 5000
const RETRY_MS = 50
const CONNECT_FLOOR_MS = 500

// The holder cuts off a client that takes nothing of an answer, or sends nothing of a
// body, for IDLE_MS (a listing holds no shard: it is not cut); answers 408 a request
// whose headers did not all come HEADERS_MS after its connection opened (checked every
// CHECK_MS); closes a connection kept alive and idle KEEP_ALIVE_MS; past its cap, cuts a
// connection that holds nothing once it had SETTLE_MS.
const IDLE_MS = 60000
const HEADERS_MS = 10000
const CHECK_MS = 1000
const KEEP_ALIVE_MS = 5000
const SETTLE_MS = 100
// Closing, it cuts off a connection with no request CLOSE_GRACE_MS after it was accepted,
// and a request whose client stalls it for CLOSE_STALL_MS, looking every CLOSE_POLL_MS.
const CLOSE_GRACE_MS = 1000
const CLOSE_STALL_MS = 5000
const CLOSE_POLL_MS = 50

const retryDelay = () => delay(RETRY_MS * (1 + Math.random()))

// The holder's http.Server options: no bound on a whole request (a write or a verify
// takes what time it takes).
function httpOptions (headersMs = HEADERS_MS) {
  return { requestTimeout: 0, headersTimeout: headersMs, connectionsCheckingInterval: Math.min(CHECK_MS, headersMs), keepAliveTimeout: KEEP_ALIVE_MS }
}

// Cuts off a request whose client sends nothing of its body for idleMs. Bytes waiting
// unread in it are the holder's doing (a slow shard, say): the wait starts again.
function cutIdleBody (req, idleMs) {
  const cut = () => {
    if (req.readableLength > 0) req.setTimeout(idleMs, cut)
    else req.destroy()
  }
  req.setTimeout(idleMs, cut)
  req.once('end', () => req.setTimeout(0))
}

// Until the response can take more, or is closed: the client went away, or took nothing
// for idleMs (if given) and was cut off.
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

const closePoll = () => new Promise((resolve) => setTimeout(resolve, CLOSE_POLL_MS))

module.exports = {
  CONNECT_MS,
  CONNECT_FLOOR_MS,
  IDLE_MS,
  HEADERS_MS,
  SETTLE_MS,
  CLOSE_GRACE_MS,
  CLOSE_STALL_MS,
  retryDelay,
  httpOptions,
  cutIdleBody,
  drained,
  closePoll
}

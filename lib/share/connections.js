'use strict'

// A request's headers must all have come this long after its connection opened (a
// later request on a connection kept alive: after its first byte), or it is answered
// 408 and its connection closed. Checked every CHECK_MS.
const HEADERS_MS = 10000
const CHECK_MS = 1000
// A connection kept alive after an answer is closed once idle this long.
const KEEP_ALIVE_MS = 5000
// Connections the kernel queues until they are accepted; Linux takes at most
// net.core.somaxconn (4096 since Linux 5.4).
const BACKLOG = 4096
// A connection that holds nothing (no request under way) is cut for another, while
// there are too many, only once it has had this long to send its request.
const SETTLE_MS = 100
// A closing holder waits this long for a connection it accepted to send its request
// (a client sends it as soon as it connects), then cuts it off.
const CLOSE_GRACE_MS = 1000
// A closing holder cuts off a request that waits on its client (which takes nothing of
// the answer, or sends nothing of the body) and moved no byte for this long.
const CLOSE_STALL_MS = 5000
// How often a closing holder looks at its connections.
const CLOSE_POLL_MS = 50

// The connections of a holder (server.js). Each holds a descriptor, which the store's
// own shards must not run out of, so at most `max` are served at once (their request
// taken: serve(); the holder refuses one more, and closes its connection); a
// connection holds nothing while it has no request under way, or one whose JSON body
// is still coming, and while there are more than `max`, those that held nothing the
// longest are cut (they lose nothing), once they had SETTLE_MS to send a request; the
// server accepts no more than `accepted` (2 max): past that, a new connection is
// closed as soon as it is accepted. Until the holder closes, another process's
// connection never keeps this process alive; from then on, each does, so that a
// process that closes its store does not exit under them, and the close waits for them
// (drained()).
class Connections {
  #max
  #sockets = new Set()
  #idle = new Map() // connections that hold nothing -> since when, the longest first
  #serving = new Map() // connections -> their requests under way
  #requests = new WeakMap() // socket -> the response of its latest request
  #seen = new WeakMap() // socket -> { accepted, bytes, moved }: when accepted, when its bytes last moved
  #sweeping // the timer of the next #sweep()
  #closing = false

  constructor ({ max }) {
    this.#max = max
  }

  get max () {
    return this.#max
  }

  get accepted () {
    return 2 * this.#max
  }

  add (socket) {
    if (!this.#closing) socket.unref()
    this.#sockets.add(socket)
    this.#seen.set(socket, { accepted: Date.now(), bytes: 0, moved: Date.now() })
    socket.once('close', () => {
      this.#sockets.delete(socket)
      this.#idle.delete(socket)
      this.#serving.delete(socket)
    })
    this.#idle.set(socket, Date.now())
    this.#sweepSoon()
  }

  // Notes the request on its connection until its response closes.
  request (req, res) {
    const socket = req.socket
    this.#requests.set(socket, res)
    res.once('close', () => { if (this.#requests.get(socket) === res) this.#requests.delete(socket) })
  }

  // Whether the request is served: then it holds its place until its answer ended. Not
  // if `max` are served already and its connection serves none of them.
  serve (req, res) {
    const socket = req.socket
    if (!this.#serving.has(socket) && this.#serving.size >= this.#max) return false
    this.#idle.delete(socket)
    this.#serving.set(socket, (this.#serving.get(socket) || 0) + 1)
    res.once('close', () => {
      const left = this.#serving.get(socket) - 1
      if (left > 0) return this.#serving.set(socket, left)
      this.#serving.delete(socket)
      if (!socket.destroyed) {
        this.#idle.set(socket, Date.now())
        this.#sweepSoon()
      }
    })
    return true
  }

  #tooMany () {
    return this.#idle.size + this.#serving.size > this.#max
  }

  #sweepSoon () {
    if (this.#sweeping || !this.#tooMany()) return
    this.#sweeping = setTimeout(() => {
      this.#sweeping = undefined
      this.#sweep()
    }, SETTLE_MS).unref()
  }

  // Cuts the connections that held nothing the longest, while there are too many.
  #sweep () {
    const settled = Date.now() - SETTLE_MS
    for (const [socket, since] of this.#idle) {
      if (!this.#tooMany()) return
      if (since > settled) return this.#sweepSoon()
      this.#idle.delete(socket)
      socket.destroy()
    }
  }

  // Resolves once every connection is closed, cutting off those that hold it up: a
  // request whose client stalls it for CLOSE_STALL_MS, a connection with no request
  // for CLOSE_GRACE_MS. `settle`: first, give what waits to be accepted time to be.
  async drained ({ settle = false } = {}) {
    if (!this.#closing) {
      this.#closing = true
      clearTimeout(this.#sweeping)
      for (const socket of this.#sockets) socket.ref()
    }
    if (settle) await poll()
    while (this.#sockets.size) {
      const now = Date.now()
      for (const socket of this.#sockets) {
        const seen = this.#seen.get(socket)
        const bytes = socket.bytesRead + socket.bytesWritten
        if (bytes !== seen.bytes) Object.assign(seen, { bytes, moved: now })
        const res = this.#requests.get(socket)
        const stalled = res ? waitsOnClient(res) && now - seen.moved >= CLOSE_STALL_MS : now - seen.accepted >= CLOSE_GRACE_MS && now - seen.moved >= CLOSE_GRACE_MS
        if (stalled) socket.destroy()
      }
      await poll()
    }
  }

  destroy () {
    for (const socket of this.#sockets) socket.destroy()
  }
}

// The holder's http.Server options. No bound on a whole request: a write or a verify
// takes what time it takes (the holder's idle cuts bound a client that stalls).
function httpOptions (headersMs = HEADERS_MS) {
  return { requestTimeout: 0, headersTimeout: headersMs, connectionsCheckingInterval: Math.min(CHECK_MS, headersMs), keepAliveTimeout: KEEP_ALIVE_MS }
}

const poll = () => new Promise((resolve) => setTimeout(resolve, CLOSE_POLL_MS))

// Whether a request waits on its client: the client takes nothing more of the answer,
// or the holder waits for more of the body (and holds none unread).
function waitsOnClient (res) {
  const req = res.req
  return res.writableNeedDrain || (!req.complete && req.readableLength === 0)
}

module.exports = { Connections, httpOptions, HEADERS_MS, BACKLOG }

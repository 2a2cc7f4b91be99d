'use strict'

const { SETTLE_MS, CLOSE_GRACE_MS, CLOSE_STALL_MS, closePoll } = require('./timeouts')

// Connections the kernel queues until they are accepted; Linux takes at most
// net.core.somaxconn (4096 since Linux 5.4).
const BACKLOG = 4096

// The connections of a holder (server.js), each a descriptor its own shards must not run
// out of: at most `max` are served at once (serve()), `accepted` (2 max) accepted at all.
// While more than `max` are open, those that held nothing longest (no request, or a JSON
// body still coming) are cut, once they had SETTLE_MS. They keep the process alive only
// once the holder closes, which waits for them (drained()).
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

  // Connections open now: each client's request comes on a connection of its own.
  get open () {
    return this.#sockets.size
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
    if (settle) await closePoll()
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
      await closePoll()
    }
  }

  destroy () {
    for (const socket of this.#sockets) socket.destroy()
  }
}

// Whether a request waits on its client: the client takes nothing more of the answer,
// or the holder waits for more of the body (and holds none unread).
function waitsOnClient (res) {
  const req = res.req
  return res.writableNeedDrain || (!req.complete && req.readableLength === 0)
}

module.exports = { Connections, BACKLOG }

'use strict'

// A closing holder waits this long for a connection it accepted to send its request
// (a client sends it as soon as it connects), then cuts it off.
const CLOSE_GRACE_MS = 1000
// A closing holder cuts off a request that waits on its client (which takes nothing of
// the answer, or sends nothing of the body) and moved no byte for this long.
const CLOSE_STALL_MS = 5000
// How often a closing holder looks at its connections.
const CLOSE_POLL_MS = 50

// The connections of a holder (server.js), which its close waits for. Until then,
// another process's connection never keeps this process alive; from then on, each
// does, so that a process that closes its store does not exit under them.
class Connections {
  #sockets = new Set()
  #requests = new WeakMap() // socket -> the response of its request in flight
  #seen = new WeakMap() // socket -> { accepted, bytes, moved }: when accepted, when its bytes last moved
  #closing = false

  add (socket) {
    if (!this.#closing) socket.unref()
    this.#sockets.add(socket)
    this.#seen.set(socket, { accepted: Date.now(), bytes: 0, moved: Date.now() })
    socket.once('close', () => this.#sockets.delete(socket))
  }

  // Notes the request in flight on its connection until its response closes.
  request (req, res) {
    const socket = req.socket
    this.#requests.set(socket, res)
    res.once('close', () => { if (this.#requests.get(socket) === res) this.#requests.delete(socket) })
  }

  // Resolves once every connection is closed, cutting off those that hold it up: a
  // request whose client stalls it for CLOSE_STALL_MS, a connection with no request
  // for CLOSE_GRACE_MS. `settle`: first, give what waits to be accepted time to be.
  async drained ({ settle = false } = {}) {
    if (!this.#closing) {
      this.#closing = true
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

const poll = () => new Promise((resolve) => setTimeout(resolve, CLOSE_POLL_MS))

// Whether a request waits on its client: the client takes nothing more of the answer,
// or the holder waits for more of the body (and holds none unread).
function waitsOnClient (res) {
  const req = res.req
  return res.writableNeedDrain || (!req.complete && req.readableLength === 0)
}

module.exports = { Connections }

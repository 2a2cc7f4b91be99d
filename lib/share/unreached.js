'use strict'

const fs = require('node:fs/promises')
const { socketPath, MAX_SOCKET_PATH } = require('./protocol')
const { CONNECT_MS } = require('./timeouts')
const { CLOSING, NOT_DONE } = require('./failures')

// Why the holder of the store at `dir` could not be reached, as far as can be told.
async function unreachedWhy (dir, unreached) {
  const socket = socketPath(dir)
  if (Buffer.byteLength(socket) > MAX_SOCKET_PATH) return `its socket path, ${socket}, would be longer than the ${MAX_SOCKET_PATH} bytes Linux takes, so it cannot share it: move the store to a shorter path`
  const stat = await fs.lstat(socket).catch(() => undefined)
  if (stat && !stat.isSocket()) return `${socket} is not a socket, so it could not make its socket there: remove it, then restart that process`
  if (unreached.cause && unreached.cause.timedOut) return `which did not answer within ${CONNECT_MS / 1000} s (it may be stopped, or overloaded): try again, or look at that process`
  if (unreached[CLOSING]) return 'which is closing it: try again'
  if (unreached[NOT_DONE] && unreached.code === 'EBUSY') return 'which is serving as many requests as its descriptor limit lets it take at once: try again later, or raise that process\'s limit (ulimit -n)'
  return undefined // does not share it
}

module.exports = { unreachedWhy }

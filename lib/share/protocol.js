'use strict'

const path = require('node:path')

// What the process holding a store (server.js) and the others (client.js) share: HTTP
// over a Unix socket in the store's directory, so that `curl --unix-socket` speaks it.
const SOCKET = 'kfs.sock'
const VERSION = '/v1'
const ERROR_TRAILER = 'kfs-error'
const NOT_DONE_HEADER = 'kfs-not-done'

// The routes, each a method (or two) on VERSION/path[/PARAM], which the client sends and
// the holder serves (any other request is 400 EINVAL). KEY: the key or name as the caller
// gave it, URI-encoded. `json`: its body is JSON (empty: none), read before the request
// counts as served. ?sync=1 on a write, unlink or put: synced, whatever the holder's
// `sync`.
const ROUTES = Object.freeze({
  // The file (Range: bytes=A-B for a range), with the size and SHA-256 of the version
  // read in kfs-size and kfs-sha256; HEAD: the same headers, and no body.
  read: { methods: ['GET', 'HEAD'], path: 'files', param: 'KEY' },
  // Writes the body (?sha256=HEX&size=N), answers its stat.
  write: { methods: ['PUT'], path: 'files', param: 'KEY' },
  unlink: { methods: ['DELETE'], path: 'files', param: 'KEY' },
  // Content addressing: the body's key.
  put: { methods: ['POST'], path: 'put' },
  // ?shard=N: one JSON line per file.
  list: { methods: ['GET'], path: 'list' },
  // An object of its options in; JSON lines out: { progress }, then { result }.
  verify: { methods: ['POST'], path: 'verify', json: true },
  // An array of arguments in, { result } out: the methods in CALLS.
  call: { methods: ['POST'], path: 'call', param: 'METHOD', json: true }
})

// A failure is its status and a JSON body { error: { code, message, ...props } }, or
// once a body is under way the trailer ERROR_TRAILER with the same JSON; a refusal (503
// ECLOSED while closing, EBUSY at the cap) has NOT_DONE_HEADER: 1 (failures.js).

// The methods /v1/call/ serves: the store's own checks (EROFS, EINVAL) apply to each.
const CALLS = new Set(['info', 'exists', 'stat', 'usage', 'diskUsage', 'reclaim', 'compact', 'repair'])

// Linux refuses a socket path longer than this (sun_path, with its final NUL).
const MAX_SOCKET_PATH = 107

function socketPath (dir) {
  return path.join(dir, SOCKET)
}

// The route a request names; one that takes a KEY needs one among `params`.
function routeOf (method, segment, params) {
  return Object.keys(ROUTES).find((name) => {
    const route = ROUTES[name]
    return route.path === segment && route.methods.includes(method) && (route.param !== 'KEY' || params.length > 0)
  })
}

// The method and path of a request on route `name`: `param` its KEY or METHOD; `query`'s
// values undefined are left out.
function requestOf (name, param, query = {}) {
  const route = ROUTES[name]
  const search = new URLSearchParams(Object.entries(query).filter(([, value]) => value !== undefined)).toString()
  const tail = param === undefined ? '' : `/${encodeURIComponent(param)}`
  return { method: route.methods[0], path: `${VERSION}/${route.path}${tail}${search ? `?${search}` : ''}` }
}

module.exports = { SOCKET, VERSION, ERROR_TRAILER, NOT_DONE_HEADER, ROUTES, CALLS, MAX_SOCKET_PATH, socketPath, routeOf, requestOf }

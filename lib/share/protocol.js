'use strict'

const path = require('node:path')

// What the process holding a store (server.js) and the others (client.js) share: HTTP
// over a Unix socket in the store's directory, so that `curl --unix-socket` speaks it.
const SOCKET = 'kfs.sock'
const VERSION = '/v1'
const ERROR_TRAILER = 'kfs-error'
const NOT_DONE_HEADER = 'kfs-not-done'
// On a read or a write: the client's method (readFile, writeFile), which the holder counts
// the request as in its metrics; without it, createReadStream or createWriteStream.
const CALL_HEADER = 'kfs-call'

// The routes, each a method (or two) on VERSION/path[/PARAM] (`root`: on /path, outside
// VERSION), which the client sends and the holder serves (any other request is 400 EINVAL). KEY: the key or name as the caller
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
  // An array of arguments in, { result } out: the methods in CALLS (?sync=1 on trash).
  call: { methods: ['POST'], path: 'call', param: 'METHOD', json: true },
  // store.metrics() in Prometheus's text format (version 0.0.4), where Prometheus looks.
  metrics: { methods: ['GET', 'HEAD'], path: 'metrics', root: true }
})

// A failure is its status and a JSON body { error: { code, message, ...props } }, or
// once a body is under way the trailer ERROR_TRAILER with the same JSON; a refusal (503
// ECLOSED while closing, EBUSY at the cap) has NOT_DONE_HEADER: 1 (failures.js).

// The methods /v1/call/ serves: the store's own checks (EROFS, EINVAL) apply to each.
// A holder of an older kfs answers a method it does not know 400 EINVAL: never done.
const CALLS = new Set(['info', 'exists', 'stat', 'usage', 'metrics', 'diskUsage', 'reclaim', 'compact', 'repair', 'trash', 'restoreTrash', 'emptyTrash'])

// Linux refuses a socket path longer than this (sun_path, with its final NUL).
const MAX_SOCKET_PATH = 107

function socketPath (dir) {
  return path.join(dir, SOCKET)
}

// A request's path as sent: whether it is under VERSION, its route's path, and what follows.
function pathOf (pathname) {
  const [, first, ...rest] = pathname.split('/')
  const versioned = `/${first}` === VERSION
  const [segment, ...params] = versioned ? rest : [first, ...rest]
  return { versioned, segment, params }
}

// The route of a request for `pathname`; one that takes a KEY needs one.
function routeOf (method, pathname) {
  const { versioned, segment, params } = pathOf(pathname)
  return Object.keys(ROUTES).find((name) => {
    const route = ROUTES[name]
    if (Boolean(route.root) === versioned || (route.root && params.length > 0)) return false
    return route.path === segment && route.methods.includes(method) && (route.param !== 'KEY' || params.length > 0)
  })
}

// The method and path of a request on route `name`: `param` its KEY or METHOD; `query`'s
// values undefined are left out.
function requestOf (name, param, query = {}) {
  const route = ROUTES[name]
  const search = new URLSearchParams(Object.entries(query).filter(([, value]) => value !== undefined)).toString()
  const tail = param === undefined ? '' : `/${encodeURIComponent(param)}`
  const prefix = route.root ? '' : VERSION
  return { method: route.methods[0], path: `${prefix}/${route.path}${tail}${search ? `?${search}` : ''}` }
}

module.exports = { SOCKET, VERSION, ERROR_TRAILER, NOT_DONE_HEADER, CALL_HEADER, ROUTES, CALLS, MAX_SOCKET_PATH, socketPath, pathOf, routeOf, requestOf }

'use strict'

const path = require('node:path')

// What the process holding a store (server.js) and the others (client.js) share: HTTP
// over a Unix socket in the store's directory, so that `curl --unix-socket` speaks it.
const SOCKET = 'kfs.sock'
const VERSION = '/v1'
// Later versions, each with the query keys it added. A request that carries one goes on
// the version that added it, so that an older holder, which serves VERSION alone,
// refuses it (400 EINVAL: not a path of its protocol, nothing done) rather than ignore
// the key: a write with `expires` would else be committed without it. A holder serves
// every version's routes the same; a request without those keys stays on VERSION, as
// any holder serves it.
const NEWER = Object.freeze({ '/v2': Object.freeze(['expires']) })
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
  // Writes the body (?sha256=HEX&size=N&expires=MS, each optional), answers its stat.
  write: { methods: ['PUT'], path: 'files', param: 'KEY' },
  unlink: { methods: ['DELETE'], path: 'files', param: 'KEY' },
  // Content addressing: the body's key (?expires=MS, optional).
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

// A request's path as sent: whether it is under VERSION or a NEWER one, its route's path,
// and what follows.
function pathOf (pathname) {
  const [, first, ...rest] = pathname.split('/')
  const versioned = `/${first}` === VERSION || Object.hasOwn(NEWER, `/${first}`)
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
  const prefix = route.root ? '' : versionOf(query)
  return { method: route.methods[0], path: `${prefix}/${route.path}${tail}${search ? `?${search}` : ''}` }
}

// The version a request with `query` goes on: the one that added the last of its keys.
function versionOf (query) {
  const newer = Object.keys(NEWER).filter((version) => NEWER[version].some((name) => query[name] !== undefined))
  return newer.length > 0 ? newer[newer.length - 1] : VERSION
}

// What a request on `path` (as sent) needs that an older holder does not serve: the
// keys of the version it went on, or undefined on VERSION.
function newerNeeds (path) {
  const version = `/${path.split('/')[1]}`
  return Object.hasOwn(NEWER, version) ? { version, keys: NEWER[version] } : undefined
}

module.exports = { SOCKET, VERSION, NEWER, ERROR_TRAILER, NOT_DONE_HEADER, CALL_HEADER, ROUTES, CALLS, MAX_SOCKET_PATH, socketPath, pathOf, routeOf, requestOf, newerNeeds }

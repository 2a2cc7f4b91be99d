'use strict'

const path = require('node:path')

// What the process holding a store (server.js) and the others (client.js) share: HTTP
// over a Unix socket in the store's directory, so that `curl --unix-socket` speaks it.
//
//   GET    /v1/files/KEY          the file (Range: bytes=A-B for a range), with the size
//                                 and SHA-256 of the version read in kfs-size and
//                                 kfs-sha256 (and content-range for a range)
//   HEAD   /v1/files/KEY          the same headers, and content-length; no body
//   PUT    /v1/files/KEY          writes the body (?sha256=HEX&size=N), answers its stat
//   DELETE /v1/files/KEY          unlink
//   POST   /v1/put                content addressing: the body's key
//   GET    /v1/list[?shard=N]     one JSON line per file
//   POST   /v1/verify             JSON lines: { progress }, then { result }
//   POST   /v1/call/METHOD        JSON [args] in, { result } out: the other methods
//
// ?sync=1 on a PUT, DELETE or POST /v1/put: the write is synced, as in a store opened
// with `sync` (a client's `sync` holds whatever the holder's is).
// A JSON body: verify's an object of its options, a call's an array of its arguments;
// empty, none; another shape is 400 EINVAL. KEY is the key or name as the caller gave
// it, URI-encoded. A failure is its status and a JSON body { error: { code, message,
// ...props } }; a failure once a body is under way ends it with the trailer kfs-error
// holding the same JSON. A holder that is closing refuses every request with 503
// ECLOSED and the header kfs-not-done: 1, before it did anything of it (and before its
// 100 Continue, for a client that asked for one). A request refused because the holder
// serves as many as it takes at once (server.js) is 503 EBUSY with the same header, and
// its connection closed.
const SOCKET = 'kfs.sock'
const VERSION = '/v1'
const ERROR_TRAILER = 'kfs-error'
const NOT_DONE_HEADER = 'kfs-not-done'

// The methods /v1/call/ serves: the store's own checks (EROFS, EINVAL) apply to each.
const CALLS = new Set(['info', 'exists', 'stat', 'usage', 'diskUsage', 'reclaim', 'compact', 'repair'])

// Linux refuses a socket path longer than this (sun_path, with its final NUL).
const MAX_SOCKET_PATH = 107

function socketPath (dir) {
  return path.join(dir, SOCKET)
}

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

function statusOf (err) {
  return STATUS[err.code] || 500
}

module.exports = { SOCKET, VERSION, ERROR_TRAILER, NOT_DONE_HEADER, CALLS, MAX_SOCKET_PATH, socketPath, encodeError, decodeError, statusOf }

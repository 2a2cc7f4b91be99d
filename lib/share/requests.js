'use strict'

const errors = require('../api/errors')
const { SYNC } = require('../api/args')

// What the holder (server.js) reads of a request (protocol.js), each shape checked: a
// bad one is EINVAL, which the holder answers 400.

// A JSON request body larger than this is refused.
const MAX_JSON = 1024 * 1024

// The internal options of a write, if any: ?sync=1 asks that it be synced.
function synced (query) {
  return query.get('sync') === '1' ? { [SYNC]: true } : undefined
}

// A write's or put's options of ?expires=MS, as the client sends them: 1 to 13 digits
// (args.js: 1 to LATEST_EXPIRY), nothing else. `options` as they are without it.
function expiring (query, options) {
  if (!query.has('expires')) return options
  const text = query.get('expires')
  if (!/^\d{1,13}$/.test(text)) throw errors.invalidValue('expires', `must be 1 to 13 digits (ms since the epoch), got ${JSON.stringify(text.slice(0, 100))}`)
  return { ...options, expires: Number(text) }
}

// A key as sent, URI-encoded.
function decoded (text) {
  try {
    return decodeURIComponent(text)
  } catch {
    throw errors.invalidValue('key', `is not URI-encoded: ${JSON.stringify(text.slice(0, 100))}`)
  }
}

function parseRange (header) {
  if (!header) return undefined
  const m = /^bytes=(\d+)-(\d*)$/.exec(header)
  if (!m) throw errors.invalidValue('Range', `must be bytes=start-[end], got ${JSON.stringify(header)}`)
  return m[2] === '' ? { start: Number(m[1]) } : { start: Number(m[1]), end: Number(m[2]) }
}

// A JSON body, or undefined if empty.
async function jsonBody (req) {
  const parts = []
  let size = 0
  for await (const part of req) {
    size += part.length
    if (size > MAX_JSON) throw errors.invalidValue('body', `is larger than ${MAX_JSON} bytes`)
    parts.push(part)
  }
  const text = Buffer.concat(parts).toString('utf8')
  if (!text) return undefined
  try {
    return JSON.parse(text)
  } catch {
    throw errors.invalidValue('body', 'is not JSON')
  }
}

// `body` if it is `what` (an object, or an array of arguments), `empty` if undefined.
function shaped (body, what, empty) {
  if (body === undefined) return empty
  if (Array.isArray(body) !== Array.isArray(empty) || body === null || typeof body !== 'object') {
    throw errors.invalidValue('body', `must be ${what} in JSON, got ${JSON.stringify(body).slice(0, 100)}`)
  }
  return body
}

module.exports = { synced, expiring, decoded, parseRange, jsonBody, shaped }

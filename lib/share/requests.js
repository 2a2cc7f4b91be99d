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

module.exports = { synced, decoded, parseRange, jsonBody, shaped }

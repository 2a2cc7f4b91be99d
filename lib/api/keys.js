'use strict'

const crypto = require('node:crypto')
const errors = require('./errors')

// A key is 40 or 64 hex digits: the length is checked first, which spares the pattern
// the alternation it would backtrack through on every key.
const HEX = /^[0-9a-fA-F]*$/
const isHexKey = (input) => (input.length === 40 || input.length === 64) && HEX.test(input)
// Names are kept in every file's metadata record, which listing reads: bound them.
const MAX_NAME_BYTES = 4096
// A lone surrogate has no UTF-8 form: encoding turns it into U+FFFD, so '\ud800x' and
// '\ufffdx' would be one file. Such a name is refused.
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/

// A 40 or 64 hex-character key is used as is (lower-cased); any other non-empty string
// that is well-formed Unicode is a name, hashed with RIPEMD-160 as the KFS design does.
function coerceKey (input) {
  if (typeof input !== 'string') throw errors.invalidType('key', 'a non-empty string', input)
  if (input === '') throw errors.invalidValue('key', 'must not be empty')
  if (isHexKey(input)) return { key: input.toLowerCase(), name: undefined }
  if (!input.isWellFormed()) {
    const at = input.search(LONE_SURROGATE)
    throw errors.invalidValue('key', `is a name with a lone surrogate (\\u${input.charCodeAt(at).toString(16)} at index ${at}), which UTF-8 cannot store: names must be well-formed Unicode`)
  }
  const bytes = Buffer.from(input, 'utf8')
  if (bytes.length > MAX_NAME_BYTES) throw errors.invalidValue('key', `is a name longer than ${MAX_NAME_BYTES} bytes`)
  return { key: crypto.createHash('ripemd160').update(bytes).digest('hex'), name: input }
}

function contentHash () {
  return crypto.createHash('sha256')
}

// The SHA-256 (hex) of bytes at hand, in one call.
function sha256Of (buffer) {
  return crypto.hash('sha256', buffer)
}

module.exports = { coerceKey, contentHash, sha256Of, MAX_NAME_BYTES }

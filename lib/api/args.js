'use strict'

const { checkOptionNames } = require('./options')
const { SHARD_COUNT } = require('../base/shard-names')
const errors = require('./errors')

// Checks of the arguments of the store's methods. Each returns the normalised value
// or throws EINVAL (TypeError for a wrong type, RangeError for a value out of range).

// An internal option of writes, put and unlink, for a holder's client that asked for
// `sync`: this one is synced.
const SYNC = Symbol('kfs.sync')

// Only for perf/, to measure what checking costs: a read given it skips the chunk
// digests.
const UNCHECKED = Symbol.for('kfs.perf.unchecked')
// A stream lib/share/ serves to another process: close() lets it end with its request,
// which the holder waits for, rather than destroying it.
const SERVED = Symbol('kfs.served')
// A stream the holder serves for another process's call, which it counts as that call
// (readFile, writeFile) in the store's metrics (lib/api/metrics.js).
const COUNTED_AS = Symbol('kfs.countedAs')
const INTERNAL = new Set([SYNC, UNCHECKED, SERVED, COUNTED_AS])

function synced (options) {
  return Boolean(options !== null && typeof options === 'object' && options[SYNC])
}

function served (options) {
  return Boolean(options !== null && typeof options === 'object' && options[SERVED])
}

// The method a stream counts as: `method`, or the caller's method COUNTED_AS names.
function countedAs (options, method) {
  return (options !== null && typeof options === 'object' && options[COUNTED_AS]) || method
}

// Whether `value` is an internal options object: SYNC or UNCHECKED, and nothing else
// (an AbortSignal, say, has symbol keys of its own).
function isInternal (value) {
  if (value === null || typeof value !== 'object' || Object.keys(value).length > 0) return false
  const symbols = Object.getOwnPropertySymbols(value)
  return symbols.length > 0 && symbols.every((s) => INTERNAL.has(s))
}

// Every method takes at most its documented arguments (`params`), and internally one
// more options object: a callback, an encoding or an extra key given by habit from fs,
// level or cacache is an error, not ignored. `hint` says what to call instead.
function arity (method, given, params, hint, returns = 'a promise') {
  const err = arityError(method, given, params, hint, returns)
  if (err) throw err
}

// arity()'s error, or undefined: for the methods that return a rejected promise.
// Trailing undefined arguments count as absent, as optional parameters take them.
function arityError (method, given, params, hint, returns = 'a promise') {
  let count = given.length
  while (count > 0 && given[count - 1] === undefined) count--
  const extra = count > params.length && !(count === params.length + 1 && isInternal(given[params.length]))
  if (!extra) return undefined
  if (typeof given[count - 1] === 'function') hint = `it returns ${returns} and takes no callback`
  return errors.tooManyArguments(method, params, count, hint)
}

// The parameters of a method that takes an options object after `params`: a value in its
// place that is no plain object (a callback, an encoding, a key given by habit, an
// AbortSignal) is an extra argument, for arity() to name.
function withOptions (options, params) {
  const plain = options !== null && typeof options === 'object' && [Object.prototype, null].includes(Object.getPrototypeOf(options))
  return options === undefined || plain ? [...params, 'options'] : params
}

function toBuffer (data, name = 'data') {
  if (Buffer.isBuffer(data)) return data
  if (data instanceof Uint8Array) return Buffer.from(data.buffer, data.byteOffset, data.byteLength)
  if (typeof data === 'string') return Buffer.from(data, 'utf8')
  throw errors.invalidType(name, 'a Buffer, Uint8Array or string', data)
}

function isReadable (data) {
  return data !== null && typeof data === 'object' && typeof data.pipe === 'function' && typeof data[Symbol.asyncIterator] === 'function'
}

// fn(early) with an 'error' listener on the Readable argument `readable` until it settles:
// an error it emits before its reader listens is kept, not left to kill the process, and
// early() throws it. A failure destroys `readable`, as pipeline() would.
async function whileGuarded (readable, fn) {
  let kept
  const keep = (err) => { kept = kept || err }
  readable.on('error', keep)
  try {
    return await fn(() => { if (kept) throw kept })
  } catch (err) {
    readable.destroy()
    throw err
  } finally {
    readable.off('error', keep)
  }
}

// The latest expiry the expiry index's keys can order (records.js: 13 digits).
const LATEST_EXPIRY = 9999999999999

// Option `name`, a time given as a Date or ms since the epoch, as ms (undefined: none).
function timeOption (name, value) {
  if (value === undefined) return undefined
  if (value instanceof Date) {
    const time = value.getTime()
    if (Number.isNaN(time)) throw errors.invalidValue(name, 'is an invalid Date')
    value = time
  } else if (typeof value !== 'number') {
    throw errors.invalidType(name, 'a Date or milliseconds since the epoch', value)
  }
  if (!Number.isSafeInteger(value) || value > LATEST_EXPIRY) throw errors.invalidValue(name, `must be whole milliseconds up to ${new Date(LATEST_EXPIRY).toISOString()}, got ${value}`)
  return value
}

// An expiry time as ms (undefined: none). A time before 1 (0, or before 1970) is stored
// as 1, as 0 means "none" in a head record: each is past.
function expiresOption (expires) {
  return expires === undefined ? undefined : Math.max(1, timeOption('expires', expires))
}

// emptyTrash's { before }: ms, or undefined for every file in the trash.
function emptyTrashOptions (options = {}) {
  const { before } = checkOptionNames(options, ['before'])
  return { before: timeOption('before', before) }
}

// writeFile's and put's { expires }; any internal options (SYNC) pass through.
function fileOptions (options = {}) {
  const { expires } = checkOptionNames(options, ['expires'])
  return { expires: expiresOption(expires) }
}

// createWriteStream's { sha256, size, expires }: any may be absent.
function writeOptions (options = {}) {
  const { sha256, size, expires } = checkOptionNames(options, ['sha256', 'size', 'expires'])
  if (sha256 !== undefined && (typeof sha256 !== 'string' || !/^[0-9a-fA-F]{64}$/.test(sha256))) throw errors.invalidValue('sha256', 'must be 64 hex characters')
  if (size !== undefined && typeof size !== 'number') throw errors.invalidType('size', 'a number', size)
  if (size !== undefined && (!Number.isSafeInteger(size) || size < 0)) throw errors.invalidValue('size', `must be a non-negative integer, got ${size}`)
  return { sha256: sha256 && sha256.toLowerCase(), size, expires: expiresOption(expires) }
}

function range (options = {}) {
  const { start = 0, end } = checkOptionNames(options, ['start', 'end'])
  for (const [name, value] of [['start', start], ['end', end]]) {
    if (value === undefined) continue
    if (typeof value !== 'number') throw errors.invalidType(name, 'a number', value)
    if (!Number.isSafeInteger(value) || value < 0) throw errors.invalidValue(name, `must be a non-negative integer, got ${value}`)
  }
  if (end !== undefined && end < start) throw errors.invalidValue('end', `(${end}) must not be less than start (${start})`)
  return { start, end }
}

// A shard number; `count` is the store's shard count once it is known.
function shardIndex (index, count = SHARD_COUNT) {
  if (typeof index !== 'number') throw errors.invalidType('shard', 'a number', index)
  if (!Number.isInteger(index) || index < 0 || index >= count) throw errors.invalidValue('shard', `must be an integer from 0 to ${count - 1}, got ${index}`)
  return index
}

function verifyOptions (options = {}, count) {
  const { shard, onProgress } = checkOptionNames(options, ['shard', 'onProgress'])
  if (shard !== undefined) shardIndex(shard, count)
  if (onProgress !== undefined && typeof onProgress !== 'function') throw errors.invalidType('onProgress', 'a function', onProgress)
  return { shard, onProgress }
}

module.exports = { SYNC, UNCHECKED, SERVED, COUNTED_AS, synced, served, countedAs, arity, arityError, withOptions, toBuffer, isReadable, whileGuarded, fileOptions, writeOptions, emptyTrashOptions, range, shardIndex, verifyOptions }

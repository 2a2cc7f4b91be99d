'use strict'

const { shardName } = require('../base/shard-names')

// Every error kfs raises on purpose carries a stable, fs-style `code`. Messages may
// change between versions; codes do not.

function make (Class, code, message, props = {}) {
  const { cause, ...data } = props
  const err = new Class(message, cause === undefined ? undefined : { cause })
  err.code = code
  return Object.assign(err, data)
}

// Bad arguments: TypeError for a wrong type, RangeError for a value out of range, both
// with code EINVAL, as Node core does with ERR_INVALID_ARG_TYPE / _VALUE.
function invalidType (argument, expected, actual) {
  return make(TypeError, 'EINVAL', `${argument} must be ${expected}, got ${describe(actual)}`, { argument })
}

function invalidValue (argument, message, props) {
  return make(RangeError, 'EINVAL', `${argument} ${message}`, { argument, ...props })
}

// store.<method>(...) given `count` arguments where it takes `params`.
function tooManyArguments (method, params, count, hint) {
  const takes = params.length === 0 ? 'no arguments' : `${params.length === 1 ? '1 argument' : `${params.length} arguments`} (${params.join(', ')})`
  return make(TypeError, 'EINVAL', `store.${method}() takes ${takes}, got ${count}${hint ? `: ${hint}` : ''}`)
}

function notFound (key) {
  return make(Error, 'ENOENT', `no file with key ${key}`, { key })
}

// An error about the file `key`, told in place of the name the caller gave it
// (err.fileName, and in the message); any other error is returned as it is.
function named (err, { key, name }) {
  if (name === undefined || !err || err.key !== key || err.fileName !== undefined) return err
  const before = err.message
  const label = `${JSON.stringify(name)} (key ${key})`
  // Functions as replacements: a name may hold `$&` or `$'`, which a string would expand.
  err.message = before.includes(`with key ${key}`) ? before.replace(`with key ${key}`, () => `named ${label}`) : before.replace(key, () => label)
  err.fileName = name
  return err
}

function noShard (shard) {
  return make(Error, 'ENOENT', `shard ${shardName(shard)} was never created: there is nothing to repair`, { shard })
}

// needed: the file's size, or what came before the shard was full (sizeKnown false);
// free: the room the shard had when its write began.
function noSpace (shard, needed, free, sizeKnown = true) {
  const size = sizeKnown ? `the file is ${needed} bytes` : `the file reached ${needed} bytes`
  return make(Error, 'ENOSPC', `shard ${shardName(shard)} is full: ${size}, and the shard had ${free} bytes free when its write began`, { shard, needed, free })
}

function tooLarge (size, cap) {
  return make(Error, 'ENOSPC', `a file of ${size} bytes or more cannot be stored: a shard holds at most ${cap}`, { needed: size, free: cap })
}

// The filesystem, not a shard's cap, is full.
function diskFull (where, message, props) {
  return make(Error, 'ENOSPC', `the disk is full (${where}): ${message}`, { ...props, disk: true })
}

function tooBigToRead (key, size) {
  return make(RangeError, 'EFBIG', `file ${key} (${size} bytes) is larger than the largest Buffer (${require('node:buffer').constants.MAX_LENGTH} bytes): read it with createReadStream()`, { key, size })
}

function integrity (key, message, props) {
  return make(Error, 'EINTEGRITY', `file ${key} is damaged: ${message}`, { key, ...props })
}

function corrupt (what, message, props = {}) {
  const verb = props.shards && props.shards.length > 1 ? 'are' : 'is'
  return make(Error, 'ECORRUPT', `${what} ${verb} corrupt: ${message}`, props)
}

// pid: the holder's, when known; shared: whether this open would have used a holder
// that shares it; why: what is known of why it could not reach it.
function busy (dir, cause, { pid, shared = false, why } = {}) {
  if (pid === undefined) return make(Error, 'EBUSY', `the store at ${dir} is in use by another process or store instance`, { path: dir, cause })
  const who = pid === process.pid ? `another store instance of this process (${pid})` : `process ${pid}`
  const what = !shared
    ? 'and this store was opened with share: false: open it with share: true to use it through that process, or stop that process'
    : why || 'which does not share it (it was opened with share: false, or by an older kfs): stop it, or open the store there with share: true'
  return make(Error, 'EBUSY', `the store at ${dir} is in use by ${who}, ${what}`, { path: dir, pid, cause })
}

function shardsBusy (shard, maxOpen, waited) {
  return make(Error, 'EBUSY', `waited ${waited} ms for shard ${shardName(shard)}: all ${maxOpen} shards that may be open (maxOpenShards) are in use; ` +
    'finish or destroy open streams, or raise maxOpenShards', { shard })
}

function shardBusy (shard, why) {
  return make(Error, 'EBUSY', `shard ${shardName(shard)} ${why}`, { shard })
}

function cancelled (key) {
  return make(Error, 'ECANCELED', `the write of ${key} was cancelled before its commit`, { key })
}

// An operating-system failure (EMFILE, EACCES, ENOSPC...) keeps its own code.
function system (what, err, props) {
  const code = err.code || 'EIO'
  return make(Error, code, `${what}: ${err.message}`, { ...props, cause: err, ...(code === 'ENOSPC' ? { disk: true } : {}) })
}

// A write to a store, or a database of it, opened read-only.
function readOnly (what, props) {
  return make(Error, 'EROFS', `${what} is open read-only: writes are refused`, props)
}

// The codes of an open that may not write: a read-only mount, no write permission, files
// made immutable.
const NOT_WRITABLE = Object.freeze(['EROFS', 'EACCES', 'EPERM'])

// `err` (one of NOT_WRITABLE) from opening a store read-write, saying how to read it.
function notWritable (what, err, props) {
  return system(what, { code: err.code, message: `${err.message}; a store that cannot be written opens for reads with the option readOnly: true`, cause: err }, props)
}

// kfs could not create the directory `made` (the store's, or one above it) for the
// reason `why`; `cause`: the OS's error, whose code it keeps.
function notCreated (dir, made, why, cause) {
  return make(Error, cause.code || 'EIO', `the store at ${dir} could not be created: kfs could not create the directory ${made}: ${why}`, { path: dir, cause })
}

// The store's `what` (its directory, or a file in it) belongs to the user `owner`, and
// this process may not write it, or not even read it (`readable` false).
function otherUser (dir, what, owner, readable, cause, props) {
  const reads = readable ? ', or open it for reads with the option readOnly: true' : ''
  const message = what === dir
    ? `the store at ${dir} belongs to user ${owner}, and this process (user ${process.geteuid()}) cannot ${readable ? 'write' : 'read'} it: open it as that user${reads}`
    : `${what}, in the store at ${dir}, belongs to user ${owner}, and this process (user ${process.geteuid()}) cannot ${readable ? 'write' : 'read'} it: give it back to the store's owner (chown)${reads}`
  return make(Error, 'EACCES', message, { ...props, path: dir, owner, cause })
}

function closed () {
  return make(Error, 'ECLOSED', 'the store is closed')
}

// A store opened with hold: false, which no process holds (or whose holder did not answer).
function notHeld (dir, why, cause) {
  return make(Error, 'ENOTCONN', `no process holds the store at ${dir}${why ? `, ${why}` : ''}; this store was opened with hold: false, so it does not open it itself`, { path: dir, cause })
}

function noStore (dir, why) {
  return make(Error, 'ENOENT', `there is no kfs store at ${dir}: ${why}`, { path: dir })
}

// A file's record holds what only a newer kfs reads: `what`, in words.
function newerRecord (key, what) {
  return make(Error, 'ENOTSUP', `file ${key} was written by a newer kfs: its head record ${what}, which this kfs does not read; upgrade kfs`, { key })
}

function newerFormat (file, found, supported) {
  return make(Error, 'ENOTSUP', `the store was made by a newer kfs: ${file} says format ${found}, this kfs reads format ${supported} and older; upgrade kfs`, { path: file, found, supported })
}

// The process holding the store refused a request on the protocol's `version`, which
// its older kfs does not serve: it did nothing of it.
function olderHolder (version, keys) {
  return make(Error, 'ENOTSUP', `the process holding the store runs an older kfs, which does not know ${keys.join(', ')} ` +
    `(it does not serve ${version}): nothing was done; upgrade the kfs of the process that holds the store`)
}

// `within`: a directory above it is a file (`cause`, the OS's ENOTDIR).
function notDirectory (dir, { within = false, cause } = {}) {
  const why = within ? 'cannot be a directory: a part of that path is a file, not a directory' : 'exists and is not a directory'
  return make(Error, 'ENOTDIR', `the store path ${dir} ${why}`, { path: dir, cause })
}

function notStore (dir, entry) {
  return make(Error, 'EINVAL', `${dir} is not a kfs store: it holds "${entry}" and no format.json`, { path: dir })
}

// One error for the shards an operation could not do (`failed`: [{ shard, error }]),
// once it did the others (`done`: 'listed', say; `others`: whether there were).
// ECORRUPT if every failure was damage, else the code of the first that was not, which
// a repair does not cure.
function shardsFailed (failed, done, others) {
  const shards = [...new Set(failed.map((f) => f.shard))]
  const what = `shard${shards.length > 1 ? 's' : ''} ${shards.map(shardName).join(', ')}`
  const reasons = failed.map(({ error }) => (error.cause && error.cause.message ? error.cause.message : error.message)).join('; ')
  const rest = others ? `; the other shards were ${done}` : ''
  const notDamage = failed.find(({ error }) => error.code !== 'ECORRUPT')
  const props = { shard: shards[0], shards, errors: failed.map((f) => f.error), cause: (notDamage || failed[0]).error }
  if (!notDamage) return corrupt(what, reasons + rest, props)
  return system(`${what} could not be ${done}`, { code: notDamage.error.code, message: reasons + rest }, props)
}

function describe (value) {
  if (value === null) return 'null'
  if (Buffer.isBuffer(value)) return 'a Buffer'
  if (typeof value === 'string') return value.length > 40 ? 'a string' : JSON.stringify(value)
  if (typeof value === 'object') return value.constructor ? `an instance of ${value.constructor.name}` : 'an object'
  return `${typeof value} ${String(value)}`
}

// ENOSPC from the filesystem filling up, as opposed to a shard's cap.
const isDiskFull = (err) => Boolean(err) && err.code === 'ENOSPC' && Boolean(err.disk || err.syscall)

const is = (code) => (err) => Boolean(err) && err.code === code

module.exports = {
  invalidType,
  invalidValue,
  tooManyArguments,
  notFound,
  named,
  noShard,
  noSpace,
  diskFull,
  tooBigToRead,
  noStore,
  notHeld,
  newerFormat,
  olderHolder,
  newerRecord,
  tooLarge,
  integrity,
  corrupt,
  busy,
  shardsBusy,
  shardBusy,
  cancelled,
  system,
  shardsFailed,
  closed,
  notCreated,
  otherUser,
  readOnly,
  notWritable,
  NOT_WRITABLE,
  notDirectory,
  notStore,
  isNotFound: is('ENOENT'),
  isNoSpace: is('ENOSPC'),
  isDiskFull,
  isIntegrity: is('EINTEGRITY'),
  isCorrupt: is('ECORRUPT'),
  isBusy: is('EBUSY'),
  isClosed: is('ECLOSED'),
  isInvalid: is('EINVAL')
}

'use strict'

// Every error the binding reports leaves lib/leveldb/ through classify(), with a code
// from doc/api.md's table, naming the shard when the database is one; a failed open
// through openFailure().
const { shardName } = require('../base/shard-names')
const errors = require('../api/errors')

// LevelDB reports OS errors by their strerror text only.
const SYSTEM_ERRORS = {
  'Too many open files': 'EMFILE',
  'Permission denied': 'EACCES',
  'Operation not permitted': 'EPERM',
  'No space left on device': 'ENOSPC',
  'Read-only file system': 'EROFS',
  'Input/output error': 'EIO',
  'Cannot allocate memory': 'ENOMEM',
  'Disk quota exceeded': 'EDQUOT'
}

// The one classifier: damage becomes ECORRUPT naming the shard, an OS failure its own
// code (a full disk ENOSPC), a closed database ECLOSED, anything else EIO.
function classify (err, shard) {
  if (err.code) return err // classified already
  const cause = err.cause && err.cause.message ? err.cause : err
  const message = String(cause.message || cause)
  const system = Object.keys(SYSTEM_ERRORS).find((text) => message.includes(text))
  const where = shard === undefined ? 'the store state' : `shard ${shardName(shard)}`
  if (system === 'No space left on device') return errors.diskFull(where, message, { shard, cause: err })
  if (system) return errors.system(where, { code: SYSTEM_ERRORS[system], message }, { shard, cause: err })
  // A table file that is missing, damaged or cut short (a read past its end is EINVAL).
  if (/Corruption:|No such file or directory|\.(ldb|sst): Invalid argument/.test(message)) {
    const hint = shard === undefined ? '' : `; kfs repair ${shard} may recover it`
    return errors.corrupt(where, `${message}${hint}`, { shard, cause: err })
  }
  if (/Database is not open|not open|after close/i.test(message)) return errors.closed()
  return errors.system(where, { code: 'EIO', message }, { shard, cause: err })
}

// What LevelDb.open rejects with: an Error carrying a `reason`, 'missing', 'locked',
// 'system' (an OS error, with its code) or 'damaged'.
function classifyOpenError (err) {
  const cause = err.cause || err
  const message = String(cause.message || cause)
  let reason = 'damaged'
  if (/does not exist \(create_if_missing is false\)/.test(message)) reason = 'missing'
  else if (/\/LOCK: (already held by process|Resource temporarily unavailable)/.test(message)) reason = 'locked'
  else if (Object.keys(SYSTEM_ERRORS).some((text) => message.includes(text))) reason = 'system'
  return Object.assign(new Error(message), { reason, code: reason === 'system' ? classify(cause).code : undefined, cause })
}

// The one mapping of a failed LevelDb.open to a kfs error: held by another process
// EBUSY naming `dir`, an OS error its own code (`what` could not be opened), anything
// else damage (`damaged`: what is corrupt; `hint`: what may recover it). `props`
// (shard, path) go on the error. A read-write open refused for want of write access
// says how to open the store read-only.
function openFailure (err, { dir, what, damaged, hint, props }) {
  if (err.reason === 'locked') return errors.busy(dir, err)
  if (err.reason === 'system') {
    const unwritable = errors.NOT_WRITABLE.includes(err.code) && !err.readOnly
    return (unwritable ? errors.notWritable : errors.system)(`${what} could not be opened`, err, props)
  }
  return errors.corrupt(damaged, hint ? `${err.message}; ${hint}` : err.message, { ...props, cause: err })
}

module.exports = { classify, classifyOpenError, openFailure }

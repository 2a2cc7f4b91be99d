'use strict'

// Every binding error leaves lib/leveldb/ through classify(), with a code from
// doc/api.md's table naming the shard; a failed open through openFailure().
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

// Damage is ECORRUPT, an OS failure its own code, a closed database ECLOSED, else EIO.
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

// An Error with a `reason`: 'missing', 'locked', 'system' (with its code) or 'damaged'.
function classifyOpenError (err) {
  const cause = err.cause || err
  const message = String(cause.message || cause)
  let reason = 'damaged'
  if (/does not exist \(create_if_missing is false\)/.test(message)) reason = 'missing'
  else if (/\/LOCK: (already held by process|Resource temporarily unavailable)/.test(message)) reason = 'locked'
  else if (Object.keys(SYSTEM_ERRORS).some((text) => message.includes(text))) reason = 'system'
  return Object.assign(new Error(message), { reason, code: reason === 'system' ? classify(cause).code : undefined, cause })
}

// A failed LevelDb.open as a kfs error: locked EBUSY naming `dir`, an OS error its own
// code (refused write access: how to open read-only), else damage to `damaged`.
function openFailure (err, { dir, what, damaged, hint, props }) {
  if (err.reason === 'locked') return errors.busy(dir, err)
  if (err.reason === 'system') {
    const unwritable = errors.NOT_WRITABLE.includes(err.code) && !err.readOnly
    return (unwritable ? errors.notWritable : errors.system)(`${what} could not be opened`, err, props)
  }
  return errors.corrupt(damaged, hint ? `${err.message}; ${hint}` : err.message, { ...props, cause: err })
}

module.exports = { classify, classifyOpenError, openFailure }

'use strict'

const { NOT_DONE, UNSENT } = require('./failures')

// Which calls a client makes again, through the next holder or here, once its holder was
// lost (lib/store/backends.js), and why each is safe.
const RULES = Object.freeze({
  // Only if the holder did nothing of it (NOT_DONE).
  IF_NOT_DONE: 'if not done',
  // Also after any loss (ECONNRESET): a second attempt ends as the first would have.
  IDEMPOTENT: 'idempotent',
  // Only if nothing of its body, a Readable, was sent (UNSENT).
  IF_UNSENT: 'if unsent',
  NEVER: 'never'
})
const { IF_NOT_DONE, IDEMPOTENT, IF_UNSENT, NEVER } = RULES

// By backend call (lib/store/local.js, lib/share/client.js).
const RETRIES = Object.freeze({
  // Reads change nothing.
  readFile: IDEMPOTENT,
  exists: IDEMPOTENT,
  stat: IDEMPOTENT,
  usage: IDEMPOTENT,
  metrics: IDEMPOTENT,
  diskUsage: IDEMPOTENT,
  // Made before its first bytes only (a stream under way fails as it is).
  openReader: IDEMPOTENT,
  // Until its first file: after, a file would be given twice (backends.js: NEVER).
  list: IDEMPOTENT,
  // A second gives back what the first left, or nothing.
  reclaim: IDEMPOTENT,
  compact: IDEMPOTENT,
  // The same content under the same key.
  put: IDEMPOTENT,
  putStream: IF_UNSENT,
  // If the first was made, a second would make it twice, over another caller's write.
  writeFile: IF_NOT_DONE,
  openWriter: IF_NOT_DONE,
  // The second would answer ENOENT for a file the first removed.
  unlink: IF_NOT_DONE,
  // Its progress went to the caller as it came: a second would report it again.
  verify: IF_NOT_DONE,
  // Its result counts what it removed: after a first that was made, a second's is none.
  repair: IF_NOT_DONE,
  // The second would answer ENOENT for a file the first put in the trash.
  trash: IF_NOT_DONE,
  // Their results count what they did: after a first that was made, a second's is none.
  restoreTrash: IF_NOT_DONE,
  emptyTrash: IF_NOT_DONE
})

// Whether a call that failed with `err` is made again, given its `retry`.
function again (err, retry) {
  if (retry === NEVER) return false
  if (err[NOT_DONE]) return retry !== IF_UNSENT || Boolean(err[UNSENT])
  return err.code === 'ECONNRESET' && retry === IDEMPOTENT
}

module.exports = { RETRIES, NEVER, again }

'use strict'

// The one "make room or reopen, then try once more" of kfs: recover(err) resolves to
// whether a second try may succeed; if not, err is thrown as it was.
async function retryOnce (fn, recover) {
  try {
    return await fn()
  } catch (err) {
    if (!(await recover(err))) throw err
    return fn()
  }
}

module.exports = { retryOnce }

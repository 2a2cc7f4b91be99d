'use strict'

// A wait that can be left. start(resolve, reject) begins the wait (joins a queue, say)
// and returns withdraw(), which takes it back out. The wait rejects with the reason of
// the first of `signals` to abort (the caller gave up, or the store closes), after
// withdraw(); otherwise it settles as start's callbacks say. Nothing is left listening
// once it settled, however it settled.
function abortable (signals, start) {
  const given = signals.filter(Boolean)
  const aborted = given.find((signal) => signal.aborted)
  if (aborted) return Promise.reject(aborted.reason)
  if (given.length === 0) return new Promise((resolve, reject) => { start(resolve, reject) })
  return new Promise((resolve, reject) => {
    let settled = false
    const settle = (fn, value) => {
      if (settled) return
      settled = true
      for (const signal of given) signal.removeEventListener('abort', onAbort)
      fn(value)
    }
    function onAbort () {
      if (settled) return
      withdraw()
      settle(reject, this.reason)
    }
    const withdraw = start((value) => settle(resolve, value), (err) => settle(reject, err)) || (() => {})
    if (!settled) for (const signal of given) signal.addEventListener('abort', onAbort, { once: true })
  })
}

module.exports = { abortable }

'use strict'

const { setMaxListeners } = require('node:events')

// A wait that can be left. start(resolve, reject) begins the wait (joins a queue, say)
// and returns withdraw(), which takes it back out. The first of `signals` to abort
// rejects it, after withdraw(); nothing is left listening once it settled.
function abortable (signals, start) {
  const given = signals.filter(Boolean)
  const aborted = given.find((signal) => signal.aborted)
  if (aborted) return Promise.reject(aborted.reason)
  if (given.length === 0) return new Promise((resolve, reject) => { start(resolve, reject) })
  return new Promise((resolve, reject) => {
    let settled = false
    const listeners = given.map((signal) => () => {
      if (settled) return
      withdraw()
      settle(reject, signal.reason)
    })
    const settle = (fn, value) => {
      if (settled) return
      settled = true
      given.forEach((signal, i) => signal.removeEventListener('abort', listeners[i]))
      fn(value)
    }
    const withdraw = start((value) => settle(resolve, value), (err) => settle(reject, err)) || (() => {})
    if (!settled) given.forEach((signal, i) => signal.addEventListener('abort', listeners[i], { once: true }))
  })
}

// An AbortController whose signal any number of waits may listen to at once (a pool's
// queue, a reader's gets): Node would warn on stderr past 10 listeners.
function controller () {
  const made = new AbortController()
  setMaxListeners(0, made.signal)
  return made
}

module.exports = { abortable, controller }

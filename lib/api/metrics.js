'use strict'

// The calls a store served, counted by the process that holds it (store.js): per method of
// the API, how many ended, how many failed by error code, and how long they took, in a
// histogram of DURATION_BUCKETS. An observation allocates nothing once its method was seen:
// a small read takes tens of microseconds, and the count must not show in it.

// Upper bounds in seconds, from a small read from an open shard to a large file's write.
const DURATION_BUCKETS = Object.freeze([
  0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10
])

// The methods counted from the start, at 0, so that a scrape lists them before their first call.
const METHODS = Object.freeze([
  'writeFile', 'readFile', 'createWriteStream', 'createReadStream', 'put', 'exists', 'stat', 'unlink',
  'list', 'usage', 'diskUsage', 'reclaim', 'compact', 'verify', 'repair', 'trash', 'restoreTrash', 'emptyTrash'
])

class OperationMetrics {
  #methods = new Map() // name -> { count, sum, buckets (not cumulative), errors: code -> count }
  #counting

  // `counting()`: whether calls are counted now. The process that holds a store counts its
  // calls, those it serves to others with them; one using the store through its holder
  // counts none, which the holder counted.
  constructor (counting = () => true) {
    this.#counting = counting
    for (const name of METHODS) this.#method(name)
  }

  // A call of `name` begun at `start` (performance.now()) ended, failed with `failure` if given.
  ended (name, start, failure) {
    if (this.#counting()) this.observe(name, performance.now() - start, failure)
  }

  // `stream`, counted as a call of `name` once it closed, failed if destroyed with an error.
  stream (name, stream) {
    const start = performance.now()
    stream.once('close', () => this.ended(name, start, stream.errored))
    return stream
  }

  // One call of `name` ended after `ms` milliseconds (performance.now(): a plain number), failed
  // with `err` if given.
  observe (name, ms, err) {
    const method = this.#methods.get(name) || this.#method(name)
    const seconds = ms / 1000
    method.count++
    method.sum += seconds
    let i = 0
    while (i < DURATION_BUCKETS.length && seconds > DURATION_BUCKETS[i]) i++
    method.buckets[i]++
    if (err) {
      const code = typeof err.code === 'string' && err.code !== '' ? err.code : 'UNKNOWN'
      method.errors.set(code, (method.errors.get(code) || 0) + 1)
    }
  }

  #method (name) {
    const method = { count: 0, sum: 0, buckets: new Float64Array(DURATION_BUCKETS.length + 1), errors: new Map() }
    this.#methods.set(name, method)
    return method
  }

  // { [name]: { count, errors: { [code]: count }, seconds: { sum, buckets } } }: `buckets`
  // cumulative, one per DURATION_BUCKETS bound, then +Inf (= count). Plain data: JSON as is.
  snapshot () {
    const out = {}
    for (const [name, { count, sum, buckets, errors }] of this.#methods) {
      let seen = 0
      out[name] = {
        count,
        errors: Object.fromEntries(errors),
        seconds: { sum, buckets: Array.from(buckets, (n) => (seen += n)) }
      }
    }
    return out
  }
}

module.exports = { OperationMetrics, DURATION_BUCKETS, METHODS }

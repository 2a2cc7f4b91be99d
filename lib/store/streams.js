'use strict'

const args = require('../api/args')
const errors = require('../api/errors')
const { coerceKey } = require('../api/keys')
const { WriteStream, ReadStream } = require('../data/streams')

// The Store's calls that return a stream or an async iterable rather than a promise: the
// Store checked their arguments' count, they check the rest at once (EINVAL thrown, like
// fs.createReadStream), and their work waits for the store to open. `store`, what they use
// of the Store (lib/store.js): backends, streams (OpenStreams), counts (OperationMetrics),
// operations, sync(options), writable(), op(name, call, how) (Store#op) and shardCount().
class StoreStreams {
  #store

  constructor (store) {
    this.#store = store
  }

  createWriteStream (key, options) {
    const { backends, streams, counts } = this.#store
    const file = coerceKey(key)
    const { sha256: expectedSha256, size, expires } = args.writeOptions(options)
    const served = args.served(options)
    const admit = streams.admission(served)
    const sync = this.#store.sync(options)
    const stream = new WriteStream((signal) => Promise.resolve().then(() => {
      admit()
      this.#store.writable()
      return backends.run('openWriter', (b) => b.openWriter(file, { expectedSha256, size, expires, sync, signal }))
    }), (err) => errors.named(err, file), { frees: served })
    return streams.add(counts.stream(args.countedAs(options, 'createWriteStream'), stream), served)
  }

  createReadStream (key, options) {
    const { backends, streams, counts } = this.#store
    const file = coerceKey(key)
    const range = args.range(options)
    const unchecked = Boolean(options && options[args.UNCHECKED])
    const served = args.served(options)
    const admit = streams.admission(served)
    const stream = new ReadStream((signal) => Promise.resolve().then(() => {
      admit()
      return backends.run('openReader', (b) => b.openReader(file, range, { unchecked, signal }))
    }), (err) => errors.named(err, file))
    return streams.add(counts.stream(args.countedAs(options, 'createReadStream'), stream), served)
  }

  // An async iterable of { key, size, name } for every committed file (lib/data/list.js).
  // `options`: internal (args.SERVED).
  list (shard, options) {
    if (shard !== undefined) args.shardIndex(shard, this.#store.shardCount())
    return this.#list(shard, args.served(options) && !this.#store.operations.closed)
  }

  // Counted once the listing ended: read to its end, failed, or stopped by its caller.
  async * #list (only, admitted) {
    const start = performance.now()
    let failure
    try {
      await this.#store.op('list', () => {}, { counted: false }) // open, the shard count known
      if (only !== undefined) args.shardIndex(only, this.#store.shardCount())
      yield * this.#store.backends.list(only, { admitted })
    } catch (err) {
      failure = err
      throw err
    } finally {
      this.#store.counts.ended('list', start, failure)
    }
  }
}

module.exports = { StoreStreams }

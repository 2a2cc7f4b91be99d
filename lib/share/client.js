'use strict'

const errors = require('../api/errors')
const { Sender, readAll } = require('./sender')
const { CONNECT_MS } = require('./timeouts')
const { CALL_HEADER } = require('./protocol')

// A store held by another process, reached through its socket (server.js): the remote
// backend of a Store (lib/store/backends.js), with the local one's calls. A request that
// loses its holder calls onLost(this) first.
class Remote {
  #sender

  constructor (socket, onLost = () => {}) {
    this.#sender = new Sender(socket, () => onLost(this))
  }

  // Resolves to a Remote once the holder answered within `timeout` ms.
  static async connect (socket, { timeout = CONNECT_MS, onLost } = {}) {
    const remote = new Remote(socket, onLost)
    remote.info = await remote.#call('info', [], { timeout })
    return remote
  }

  get format () {
    const { referenceId, chunkSize, shardCapacity, shardCount } = this.info
    return { referenceId, chunkSize, shardCap: shardCapacity, shardCount }
  }

  get heldBy () {
    return this.info.pid
  }

  // Ends every request still open (a listing a caller stopped reading).
  close () {
    this.#sender.close()
  }

  call (method, ...args) {
    return this.#call(method, args)
  }

  exists (file) {
    return this.call('exists', sent(file))
  }

  async stat (file) {
    const stat = await this.call('stat', sent(file))
    const revived = { ...stat, mtime: new Date(stat.mtime) }
    if (stat.expires !== undefined) revived.expires = new Date(stat.expires)
    return revived
  }

  usage () {
    return this.call('usage')
  }

  metrics () {
    return this.call('metrics')
  }

  diskUsage () {
    return this.call('diskUsage')
  }

  reclaim () {
    return this.call('reclaim')
  }

  compact () {
    return this.call('compact')
  }

  repair (shard) {
    return this.call('repair', shard)
  }

  // ?sync=1: synced, as an unlink.
  trash (file, { sync } = {}) {
    return this.#call('trash', [sent(file)], { query: { sync: sync ? '1' : undefined } })
  }

  restoreTrash () {
    return this.call('restoreTrash')
  }

  // `before`: ms (args.js normalised it), sent as a number.
  emptyTrash ({ before }) {
    return this.call('emptyTrash', before === undefined ? {} : { before })
  }

  // The holder counts the request as a readFile (CALL_HEADER), as writeFile's below.
  async readFile (file) {
    const res = await this.#sender.request('read', sent(file), { headers: { [CALL_HEADER]: 'readFile' } })
    const parts = []
    for await (const part of this.#sender.guarded(res)) parts.push(part)
    return Buffer.concat(parts)
  }

  // A buffer can be sent again: it does not wait for 100 Continue.
  async writeFile (file, buffer, { expires, sync } = {}) {
    const writer = await this.openWriter(file, { expires, sync, continued: false, call: 'writeFile' })
    try {
      await writer.write(buffer)
    } catch (err) {
      await writer.abort()
      throw err
    }
    await writer.finish()
  }

  async put (data, { expires, sync } = {}) {
    const res = await this.#sender.request('put', undefined, { query: { expires: timeOf(expires), sync: sync ? '1' : undefined }, body: data })
    return JSON.parse(await readAll(res)).result
  }

  putStream (readable, options) {
    return this.put(readable, options)
  }

  async unlink (file, { sync } = {}) {
    const res = await this.#sender.request('unlink', sent(file), { query: { sync: sync ? '1' : undefined } })
    await readAll(res)
  }

  // A reader for ReadStream (data/streams.js).
  async openReader (file, range) {
    const headers = range ? { range: `bytes=${range.start || 0}-${range.end === undefined ? '' : range.end}` } : {}
    const res = await this.#sender.request('read', sent(file), { headers })
    const chunks = this.#sender.guarded(res)[Symbol.asyncIterator]()
    return {
      read: async () => (await chunks.next()).value,
      close: async () => res.destroy()
    }
  }

  // A writer for WriteStream: the body of one PUT, committed when it ends.
  openWriter (file, { expectedSha256, size, expires, sync, continued = true, call } = {}) {
    const query = { sha256: expectedSha256, size: size === undefined ? undefined : String(size), expires: timeOf(expires), sync: sync ? '1' : undefined }
    return this.#sender.upload('write', sent(file), query, continued, call && { [CALL_HEADER]: call })
  }

  async * list (shard) {
    const res = await this.#sender.request('list', undefined, { query: { shard } })
    yield * this.#sender.lines(res)
  }

  async verify (options = {}) {
    const { onProgress, ...rest } = options
    const res = await this.#sender.request('verify', undefined, { body: JSON.stringify({ ...rest, progress: Boolean(onProgress) }), headers: JSON_HEADERS })
    try {
      for await (const line of this.#sender.lines(res)) {
        if (line.result) return line.result
        onProgress(line.progress)
      }
    } finally {
      res.destroy()
    }
    throw errors.system('the store\'s holder', { code: 'EIO', message: 'its answer to verify ended without a result' })
  }

  async #call (method, args, { timeout, query } = {}) {
    const res = await this.#sender.request('call', method, { timeout, query, body: JSON.stringify(args), headers: JSON_HEADERS })
    return JSON.parse(await readAll(res)).result
  }
}

const JSON_HEADERS = { 'content-type': 'application/json' }

// A file as its caller named it: the holder's own store coerces it again, and names it
// in its errors.
// An expiry time (ms, as args.js normalised it) as a query sends it.
const timeOf = (expires) => (expires === undefined ? undefined : String(expires))

function sent (file) {
  return file.name === undefined ? file.key : file.name
}

module.exports = { Remote }

'use strict'

const fs = require('node:fs')
const crypto = require('node:crypto')
const { Readable } = require('node:stream')
const { pipeline } = require('node:stream/promises')
const { Progress, metered, finished } = require('./progress')
const { println, write } = require('./output')

// kfs put [file] [--key k] [--size n] [--allow-empty] [--expires when]: see doc/cli.md.
async function put (store, io, file, { key, size: wanted, allowEmpty, expires }) {
  const fromStdin = !file || file === '-'
  const name = fromStdin ? 'standard input' : file
  if (fromStdin) refuseDirectory(io.stdin, name)
  // Without a FILE, on a terminal, kfs would seem to hang.
  if (fromStdin && io.stdin.isTTY) await write(io.stderr, 'kfs: reading standard input (end it with Ctrl-D)\n')
  // An empty standard input is more often a failed producer than an empty file.
  const refuseEmpty = fromStdin && !allowEmpty && wanted === undefined
  const printKey = (k) => println(io.stdout, io.json ? JSON.stringify({ key: k }) : k)
  if (expires && expires.getTime() <= Date.now()) await write(io.stderr, `kfs: warning: --expires ${expires.toISOString()} is not in the future: the file is stored expired, and no reader finds it\n`)
  const stats = fromStdin ? undefined : await fs.promises.stat(file)
  if (stats && stats.isDirectory()) throw isDirectory(file)
  // /dev/zero or /dev/urandom never ends: it would be spooled up to the shard's cap
  // (32 GiB by default), then refused.
  if (stats && stats.isCharacterDevice() && wanted === undefined) {
    throw Object.assign(new Error(`${file} is a character device, which may never end: give --size <bytes> to store that many bytes of it`), { code: 'EINVAL' })
  }
  const regular = Boolean(stats && stats.isFile())
  if (regular && wanted > stats.size) throw endedEarly(file, stats.size, wanted)
  const size = wanted ?? (regular ? stats.size : undefined)
  const read = () => {
    const source = fromStdin ? io.stdin : fs.createReadStream(file)
    if (refuseEmpty) return Readable.from(notEmpty(source), { objectMode: false })
    return wanted === undefined ? source : Readable.from(firstBytes(source, wanted, name), { objectMode: false })
  }
  if (wanted !== undefined && key === undefined && !regular) {
    await store.open()
    if (wanted > store.shardCapacity) throw Object.assign(new Error(`a file of ${wanted} bytes cannot be stored: a shard holds at most ${store.shardCapacity}`), { code: 'ENOSPC' })
  }
  // A regular file is read with its size known; standard input, a FIFO, a device or a
  // socket can be read only once, as it comes (put() spools it while hashing it).
  if (key !== undefined || !regular) {
    const progress = Progress.create({ stream: io.stderr, total: size, label: 'put' })
    const written = key === undefined ? store.put(metered(read(), progress), { expires }) : writeTo(store, key, read(), progress, { size, expires })
    return printKey(await unchanged(file, finished(written, progress))).then(() => 0)
  }
  // A file can be read twice: hashed first, it is neither spooled nor written again.
  const hashing = Progress.create({ stream: io.stderr, total: size, label: 'hash' })
  const hash = crypto.createHash('sha256')
  await finished(pipeline(metered(read(), hashing), hash), hashing)
  const sha256 = hash.digest('hex')
  // Stored already only if the same content is, with the same expiry: other bytes may
  // have been stored under this key with --key, and are then replaced, and the expiry
  // asked for replaces the stored one, as the library's put() does.
  const stored = await store.stat(sha256).catch((err) => {
    if (err.code !== 'ENOENT') throw err
  })
  if (!stored || stored.sha256 !== sha256 || stored.size !== size || stored.expires?.getTime() !== expires?.getTime()) {
    const progress = Progress.create({ stream: io.stderr, total: size, label: 'put' })
    // The second read is checked against the first before anything is committed; the
    // size is claimed first, so a file too large for its shard is refused at once.
    const ws = store.createWriteStream(sha256, { sha256, size, expires })
    await unchanged(file, finished(pipeline(metered(read(), progress), ws), progress))
  }
  await printKey(sha256)
  return 0
}

// Standard input, which fails the put, nothing stored, if it ends before any byte.
async function * notEmpty (source) {
  let empty = true
  for await (const chunk of source) {
    if (chunk.length) empty = false
    yield chunk
  }
  if (empty) throw Object.assign(new Error('standard input was empty: nothing was stored (give --allow-empty to store an empty file)'), { code: 'ENODATA' })
}

// The first `size` bytes of `source` (put --size), which is then destroyed: the rest is
// never read. A source that ends sooner fails the put.
async function * firstBytes (source, size, name) {
  let left = size
  if (left > 0) {
    for await (const chunk of source) {
      yield chunk.subarray(0, left)
      left -= Math.min(chunk.length, left)
      if (left === 0) break
    }
  }
  if (left > 0) throw endedEarly(name, size - left, size)
}

function endedEarly (name, got, wanted) {
  return new Error(`${name} ended after ${got} bytes, fewer than --size (${wanted}); nothing was stored`)
}

// A regular file read with its size (and hash) known beforehand: other bytes mean it
// changed meanwhile, which is not a usage error.
function unchanged (file, storing) {
  return storing.catch((err) => {
    if (err.code !== 'EINTEGRITY' && !(err.code === 'EINVAL' && err.argument === 'data')) throw err
    throw Object.assign(new Error(`${file} changed while it was being stored; nothing was stored`), { code: 'EAGAIN', cause: err })
  })
}

// Reading a directory as a stream gives no bytes: it would store an empty file.
function refuseDirectory (stream, name) {
  if (stream && typeof stream.fd === 'number' && fs.fstatSync(stream.fd).isDirectory()) throw isDirectory(name)
}

function isDirectory (name) {
  return Object.assign(new Error(`${name} is a directory, not a file`), { code: 'EISDIR' })
}

async function writeTo (store, key, source, progress, options) {
  const ws = store.createWriteStream(key, options)
  await pipeline(metered(source, progress), ws)
  return ws.key
}

module.exports = { put }

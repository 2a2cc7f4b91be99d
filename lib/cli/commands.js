'use strict'

const fs = require('node:fs')
const path = require('node:path')
const crypto = require('node:crypto')
const { Readable } = require('node:stream')
const { pipeline } = require('node:stream/promises')
const { Progress } = require('./progress')
const { Output } = require('./output')
const { humanSize, table, escapeField } = require('./text')
const { diskUsage } = require('../dir/disk-usage')
const { syncDir } = require('../dir/sync-dir')
const { shardName } = require('../shard/routing')
const args = require('../api/args')

// Each command gets the store, its arguments and `io` ({ stdin, stdout, stderr, and
// `temps`, a Set of files to remove if the process is interrupted }) and resolves to
// the process exit code.

async function put (store, io, file, { key, size: wanted }) {
  const fromStdin = !file || file === '-'
  const name = fromStdin ? 'standard input' : file
  if (fromStdin) refuseDirectory(io.stdin, name)
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
    const written = key === undefined ? store.put(metered(read(), progress)) : writeTo(store, key, read(), progress, size)
    return println(io.stdout, await unchanged(file, finished(written, progress))).then(() => 0)
  }
  // A file can be read twice: hash it first, so stored content is not written again
  // and nothing is spooled, then stream it into its shard.
  const hashing = Progress.create({ stream: io.stderr, total: size, label: 'hash' })
  const hash = crypto.createHash('sha256')
  await finished(pipeline(metered(read(), hashing), hash), hashing)
  const sha256 = hash.digest('hex')
  // Stored already only if the same content is: other bytes may have been stored under
  // this key with --key, and are then replaced.
  const stored = await store.stat(sha256).catch((err) => {
    if (err.code !== 'ENOENT') throw err
  })
  if (!stored || stored.sha256 !== sha256 || stored.size !== size) {
    const progress = Progress.create({ stream: io.stderr, total: size, label: 'put' })
    // The second read is checked against the first before anything is committed; the
    // size is claimed first, so a file too large for its shard is refused at once.
    const ws = store.createWriteStream(sha256, { sha256, size })
    await unchanged(file, finished(pipeline(metered(read(), progress), ws), progress))
  }
  await println(io.stdout, sha256)
  return 0
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

async function writeTo (store, key, source, progress, size) {
  const ws = store.createWriteStream(key, { size })
  await pipeline(metered(source, progress), ws)
  return ws.key
}

// `source`, counted by the progress bar when there is one.
function metered (source, progress) {
  if (!progress) return source
  const meter = progress.meter()
  pipeline(source, meter).catch(() => {}) // a source error reaches the consumer through `meter`
  return meter
}

// Clears the progress bar once `promise` settles, before anything else is printed.
async function finished (promise, progress) {
  try {
    return await promise
  } finally {
    if (progress) progress.finish()
  }
}

async function get (store, io, key, file, { start, end }) {
  args.range({ start, end }) // a reversed range is a usage error, whatever is stored
  const stat = await store.stat(key) // ENOENT before anything is created
  if (start !== undefined && start > stat.size) {
    throw Object.assign(new RangeError(`--start (${start}) is beyond the end of the file (${stat.size} bytes)`), { code: 'EINVAL' })
  }
  const last = Math.min(end ?? stat.size - 1, stat.size - 1)
  const total = Math.max(0, last - (start ?? 0) + 1)
  const progress = Progress.create({ stream: io.stderr, total, label: 'get' })
  const meter = progress ? [progress.meter()] : []
  // Created here, consumed by pipeline() at once: its errors have a listener.
  const rs = store.createReadStream(key, { start, end })
  try {
    if (!file || file === '-') {
      await pipeline(rs, ...meter, io.stdout, { end: false })
      await write(io.stdout, '') // an error writing the output is reported, not lost
      return 0
    }
    await writeFileAtomically(file, io.temps, (out) => pipeline(rs, ...meter, out))
    return 0
  } finally {
    if (progress) progress.finish()
  }
}

// Writes beside the target, syncs and renames into place: an error or a crash never
// leaves a truncated file, and an existing file is replaced only by a complete one. An
// interruption (Ctrl-C) removes the temporary file: it is in `temps` meanwhile.
async function writeFileAtomically (file, temps, fill) {
  const tmp = path.join(path.dirname(file), `.${path.basename(file)}.kfs-${crypto.randomBytes(4).toString('hex')}`)
  if (temps) temps.add(tmp)
  try {
    await fill(fs.createWriteStream(tmp, { flags: 'wx' }))
    const handle = await fs.promises.open(tmp, 'r+')
    try {
      await handle.sync()
    } finally {
      await handle.close()
    }
    await fs.promises.rename(tmp, file)
    await syncDir(path.dirname(path.resolve(file)))
  } catch (err) {
    await fs.promises.rm(tmp, { force: true })
    // The temporary file is ours: the user named the target.
    if (err.path === tmp) {
      err.path = file
      err.message = err.message.split(tmp).join(file)
    }
    throw err
  } finally {
    if (temps) temps.delete(tmp)
  }
}

async function unlink (store, io, key) {
  await store.unlink(key)
  return 0
}

async function exists (store, io, key) {
  const found = await store.exists(key)
  await println(io.stdout, String(found))
  return found ? 0 : 1
}

async function stat (store, io, key, { human, json, shards }) {
  const size = human ? humanSize : String
  if (key !== undefined && shards) throw Object.assign(new Error('--shards shows the store\'s shards: give no key'), { code: 'EINVAL' })
  if (key !== undefined) {
    const s = await store.stat(key)
    if (json) return println(io.stdout, JSON.stringify(s)).then(() => 0)
    const rows = [['key', s.key], ['size', size(s.size)], ['chunks', s.chunks], ['shard', shardName(s.shard)], ['mtime', s.mtime.toISOString()], ['sha256', s.sha256]]
    if (s.name !== undefined) rows.push(['name', escapeField(s.name)])
    await write(io.stdout, table(rows))
    return 0
  }
  const usage = await store.usage()
  if (json) return println(io.stdout, JSON.stringify(usage)).then(() => 0)
  if (shards) {
    const rows = [['shard', 'used', 'free', 'files', 'disk']]
    for (const s of usage.shards) rows.push([shardName(s.index), size(s.used), size(s.free), s.files, size(s.diskBytes)])
    rows.push(['total', size(usage.used), size(usage.free), usage.files, `capacity ${size(usage.capacity)}`])
    await write(io.stdout, table(rows))
    return 0
  }
  // A summary: the table has a row per shard created, up to 256.
  const disk = usage.shards.reduce((sum, s) => sum + s.diskBytes, 0)
  await write(io.stdout, table([['used', size(usage.used)], ['free', size(usage.free)], ['capacity', size(usage.capacity)],
    ['files', usage.files], ['shards', `${usage.shards.length} of ${store.shardCount} created`], ['disk', size(disk)]]))
  return 0
}

// Lines go out in pieces of about 64 KiB: a write per line would cost more than the
// listing itself.
// What was listed is printed even when the listing then fails (shards it could not
// read): the error follows, on stderr.
async function list (store, io, shard, { json }) {
  const out = new Output(io.stdout)
  let piece = ''
  try {
    for await (const entry of store.list(shard)) {
      piece += (json ? JSON.stringify(entry) : `${entry.key}\t${entry.size}\t${escapeField(entry.name ?? '')}`) + '\n'
      if (piece.length >= 65536) {
        await out.write(piece)
        piece = ''
      }
    }
  } finally {
    try {
      await out.write(piece)
      await out.flush()
    } finally {
      out.close()
    }
  }
  return 0
}

async function compact (store, io) {
  await store.open()
  const before = await diskUsage(store.location)
  await store.compact()
  const after = await diskUsage(store.location)
  await println(io.stdout, `disk space used by ${store.location}: ${humanSize(before)} before, ${humanSize(after)} after`)
  return 0
}

async function verify (store, io, { shard, json }) {
  let progress
  const report = await store.verify({
    shard,
    onProgress: ({ files, bytes }) => {
      progress = progress || Progress.create({ stream: io.stderr, total: undefined, label: 'verify' })
      if (progress) {
        progress.label = `verify: ${files} files`
        progress.advance(bytes - progress.done)
      }
    }
  })
  if (progress) progress.finish()
  if (json) {
    await println(io.stdout, JSON.stringify(report))
  } else {
    for (const p of report.problems) await println(io.stdout, `shard ${shardName(p.shard)} ${p.key || '(whole shard)'}: ${p.problem}`)
    const problems = report.problems.length
    await println(io.stdout, `checked ${files(report.files)} (${humanSize(report.bytes)}): ${problems ? `${problems} problem${problems > 1 ? 's' : ''}` : 'no problems'}`)
  }
  return report.problems.length ? 1 : 0
}

async function repair (store, io, shard, { json }) {
  const result = await store.repair(shard)
  if (json) return println(io.stdout, JSON.stringify(result)).then(() => 0)
  for (const d of result.dropped) await println(io.stdout, `dropped ${d.key}: ${d.problem}`)
  for (const n of result.notes) await println(io.stdout, `cleared a damage note of ${n.at}: ${n.dropped.join('; ')}`)
  const lost = result.unaccounted ? `; ${files(result.unaccounted)} more lost without a trace` : ''
  await println(io.stdout, `shard ${shardName(shard)} repaired${result.recreated ? ' (recreated empty: its directory was gone)' : ''}: ` +
    `${files(result.files)} kept (${humanSize(result.used)}), ${result.dropped.length} dropped${lost}`)
  return 0
}

const files = (n) => `${n} file${n === 1 ? '' : 's'}`

async function write (stream, text) {
  const out = new Output(stream)
  try {
    await out.write(text)
    await out.flush()
  } finally {
    out.close()
  }
}

function println (stream, line) {
  return write(stream, line + '\n')
}

// The space of a file removed or replaced comes back before the command ends: the
// store reclaims it in the background, but only after the process would be gone.
const reclaiming = (command) => async (store, ...args) => {
  const code = await command(store, ...args)
  await store.reclaim()
  return code
}

module.exports = { put: reclaiming(put), get, unlink: reclaiming(unlink), exists, stat, list, compact, verify, repair }

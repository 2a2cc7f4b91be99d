'use strict'

const fs = require('node:fs')
const path = require('node:path')
const crypto = require('node:crypto')
const { once } = require('node:events')
const { pipeline } = require('node:stream/promises')
const { Progress } = require('./progress')
const { humanSize, table } = require('./format')
const { diskUsage } = require('../disk-usage')

// Each command gets the open store, its arguments and `io` ({ stdin, stdout, stderr })
// and resolves to the process exit code.

async function put (store, io, file, { key }) {
  const fromStdin = !file || file === '-'
  if (fromStdin) {
    const progress = Progress.create({ stream: io.stderr, total: undefined, label: 'put' })
    const written = key === undefined ? store.put(metered(io.stdin, progress)) : writeTo(store, key, io.stdin, progress)
    return println(io.stdout, await finished(written, progress)).then(() => 0)
  }
  const { size } = await fs.promises.stat(file)
  if (key !== undefined) {
    const progress = Progress.create({ stream: io.stderr, total: size, label: 'put' })
    return println(io.stdout, await finished(writeTo(store, key, fs.createReadStream(file), progress), progress)).then(() => 0)
  }
  // A file can be read twice: hash it first, so stored content is not written again
  // and nothing is spooled, then stream it into its shard.
  const hashing = Progress.create({ stream: io.stderr, total: size, label: 'hash' })
  const hash = crypto.createHash('sha256')
  await finished(pipeline(metered(fs.createReadStream(file), hashing), hash), hashing)
  const sha256 = hash.digest('hex')
  if (!(await store.exists(sha256))) {
    const progress = Progress.create({ stream: io.stderr, total: size, label: 'put' })
    // The second read is checked against the first before anything is committed.
    const ws = store.createWriteStream(sha256, { sha256 })
    await finished(pipeline(metered(fs.createReadStream(file), progress), ws), progress).catch((err) => {
      if (err.code !== 'EINTEGRITY') throw err
      throw Object.assign(new Error(`${file} changed while it was being stored; nothing was stored`), { code: 'EAGAIN', cause: err })
    })
  }
  await println(io.stdout, sha256)
  return 0
}

async function writeTo (store, key, source, progress) {
  const ws = store.createWriteStream(key)
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
  const rs = store.createReadStream(key, { start, end }) // checks the key and range at once
  const stat = await store.stat(key).catch((err) => {
    rs.on('error', () => {}) // the stream met the same error: this one is reported
    rs.destroy()
    throw err
  }) // ENOENT before anything is created
  const last = Math.min(end ?? stat.size - 1, stat.size - 1)
  const total = Math.max(0, last - (start ?? 0) + 1)
  const progress = Progress.create({ stream: io.stderr, total, label: 'get' })
  const meter = progress ? [progress.meter()] : []
  try {
    if (!file || file === '-') {
      await pipeline(rs, ...meter, io.stdout, { end: false })
      return 0
    }
    // Written beside the target and renamed into place: an error never leaves a
    // truncated file, and an existing file is replaced only by a complete one.
    const tmp = path.join(path.dirname(file), `.${path.basename(file)}.kfs-${crypto.randomBytes(4).toString('hex')}`)
    try {
      await pipeline(rs, ...meter, fs.createWriteStream(tmp, { flags: 'wx' }))
      await fs.promises.rename(tmp, file)
    } catch (err) {
      await fs.promises.rm(tmp, { force: true })
      throw err
    }
    return 0
  } finally {
    if (progress) progress.finish()
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

async function stat (store, io, key, { human, json }) {
  const size = human ? humanSize : String
  if (key !== undefined) {
    const s = await store.stat(key)
    if (json) return println(io.stdout, JSON.stringify(s)).then(() => 0)
    const rows = [['key', s.key], ['size', size(s.size)], ['chunks', s.chunks], ['shard', shardName(s.shard)], ['mtime', s.mtime.toISOString()]]
    if (s.name !== undefined) rows.push(['name', s.name])
    await write(io.stdout, table(rows))
    return 0
  }
  const usage = await store.usage()
  if (json) return println(io.stdout, JSON.stringify(usage)).then(() => 0)
  const rows = [['shard', 'used', 'free', 'files', 'disk']]
  for (const s of usage.shards) rows.push([shardName(s.index), size(s.used), size(s.free), s.files, size(s.diskBytes)])
  rows.push(['total', size(usage.used), size(usage.free), usage.files, `capacity ${size(usage.capacity)}`])
  await write(io.stdout, table(rows))
  return 0
}

async function list (store, io, shard, { json }) {
  for await (const entry of store.list(shard)) {
    await println(io.stdout, json ? JSON.stringify(entry) : `${entry.key}\t${entry.size}\t${entry.name ?? ''}`)
  }
  return 0
}

async function compact (store, io) {
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
  const lost = result.unaccounted ? `; ${files(result.unaccounted)} more lost without a trace` : ''
  await println(io.stdout, `shard ${shardName(shard)} repaired${result.recreated ? ' (recreated empty: its directory was gone)' : ''}: ` +
    `${files(result.files)} kept (${humanSize(result.used)}), ${result.dropped.length} dropped${lost}`)
  return 0
}

const shardName = (index) => String(index).padStart(3, '0')
const files = (n) => `${n} file${n === 1 ? '' : 's'}`

// Writes with backpressure, so listing 100,000 files never queues them all in memory.
async function write (stream, text) {
  if (!stream.write(text)) await Promise.race([once(stream, 'drain'), once(stream, 'error').then(([err]) => { throw err })])
}

function println (stream, line) {
  return write(stream, line + '\n')
}

module.exports = { put, get, unlink, exists, stat, list, compact, verify, repair }

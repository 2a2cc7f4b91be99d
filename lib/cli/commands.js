'use strict'

const fs = require('node:fs/promises')
const { Transform } = require('node:stream')
const { pipeline } = require('node:stream/promises')
const { Progress } = require('./progress')
const { Output, write, println } = require('./output')
const { humanSize, table, escapeField, describeError, shardName } = require('./text')

// Each command gets the store, its arguments and `io` ({ stdin, stdout, stderr,
// `temps`, a Set of files to remove if the process is interrupted, and `json`, whether
// results are printed as JSON }) and resolves to the process exit code.

// What a terminal is given of a file before it is taken for binary (as git and curl
// look at the start of a file for a NUL byte).
const SNIFF_BYTES = 8000

async function get (store, io, key, file, { start, end, force }) {
  // A reversed range is a usage error, whatever is stored.
  if (end < start) throw Object.assign(new RangeError(`end (${end}) must not be less than start (${start})`), { code: 'EINVAL' })
  // A FILE written through (a FIFO, a device) is opened before the store is: see openTarget.
  const target = file && file !== '-' ? await require('./write-file').openTarget(file, io.temps) : undefined
  let progress
  try {
    const stat = await store.stat(key) // ENOENT before anything is created
    if (start !== undefined && start > stat.size) {
      throw Object.assign(new RangeError(`--start (${start}) is beyond the end of the file (${stat.size} bytes)`), { code: 'EINVAL' })
    }
    const last = Math.min(end ?? stat.size - 1, stat.size - 1)
    const total = Math.max(0, last - (start ?? 0) + 1)
    progress = Progress.create({ stream: io.stderr, total, label: 'get' })
    const meter = progress ? [progress.meter()] : []
    // Each stream is made where pipeline() takes it, which listens to its errors.
    const copy = (...out) => pipeline(store.createReadStream(key, { start, end }), ...meter, ...out)
    if (!target) {
      // Binary on a terminal can leave it in a state the user must reset: refused unless
      // asked for with FILE "-" or --force.
      if (io.stdout.isTTY && file !== '-' && !force) meter.push(textOnly())
      await copy(io.stdout, { end: false })
      await write(io.stdout, '') // an error writing the output is reported, not lost
      return 0
    }
    await target.write(copy)
    return 0
  } finally {
    if (progress) progress.finish()
    if (target) await target.close()
  }
}

// Passes a stream on unless its first bytes hold a NUL byte.
function textOnly () {
  let seen = 0
  return new Transform({
    transform (chunk, encoding, callback) {
      if (seen < SNIFF_BYTES && chunk.subarray(0, SNIFF_BYTES - seen).includes(0)) {
        return callback(Object.assign(new Error('the file looks binary and standard output is a terminal: give a FILE to write it to, or - (or --force) to write it here anyway'), { code: 'EINVAL' }))
      }
      seen += chunk.length
      callback(null, chunk)
    }
  })
}

async function unlink (store, io, key) {
  await store.unlink(key)
  return 0
}

async function exists (store, io, key) {
  const found = await store.exists(key)
  await println(io.stdout, io.json ? JSON.stringify({ exists: found }) : String(found))
  return found ? 0 : 1
}

async function stat (store, io, key, { human, shards }) {
  const size = human ? humanSize : String
  if (key !== undefined && shards) throw Object.assign(new Error('--shards shows the store\'s shards: give no key'), { code: 'EINVAL' })
  if (key !== undefined) return statFile(store, io, key, size)
  const usage = await store.usage()
  if (shards && !io.json) return statShards(io, usage, size)
  // The store's files, read from every directory of the store, and what the filesystem
  // holding it has available (the holder's is this one).
  const disk = await store.diskUsage()
  const diskFree = await diskFreeBytes(store.location)
  if (io.json) return println(io.stdout, JSON.stringify({ ...usage, disk, diskFree, heldBy: store.heldBy ?? null, heldHere: store.heldBy === process.pid, takenOver: store.takenOver })).then(() => 0)
  // disk: the store's files; reserve: the file kept back for a full disk (diskReserve),
  // which holds no data.
  await write(io.stdout, table([['used', size(usage.used)], ['free', freeRoom(usage.free, diskFree, size)], ['capacity', size(usage.capacity)],
    ...counted(usage).map(([name, cell]) => [name, cell(usage, size)]),
    ['files', usage.files], ['shards', `${usage.shards.length} of ${store.shardCount} created`], ['disk', size(disk)], ['reserve', size(usage.reserve)],
    ['holder', holder(store)]]))
  return 0
}

async function statFile (store, io, key, size) {
  const s = await store.stat(key)
  if (io.json) return println(io.stdout, JSON.stringify(s)).then(() => 0)
  const rows = [['key', s.key], ['size', size(s.size)], ['chunks', s.chunks], ['shard', shardName(s.shard)], ['mtime', s.mtime.toISOString()], ['sha256', s.sha256]]
  if (s.name !== undefined) rows.push(['name', escapeField(s.name)])
  rows.push(['expires', s.expires ? s.expires.toISOString() : 'never'])
  await write(io.stdout, table(rows))
  return 0
}

async function statShards (io, usage, size) {
  const columns = counted(usage)
  const extra = (figures) => columns.map(([, cell]) => cell(figures, size))
  const rows = [['shard', 'used', 'free', 'files', 'disk', ...columns.map(([name]) => name)]]
  for (const s of usage.shards) rows.push([shardName(s.index), size(s.used), size(s.free), s.files, size(s.diskBytes), ...extra(s)])
  rows.push(['total', size(usage.used), size(usage.free), usage.files, `capacity ${size(usage.capacity)}`, ...extra(usage)])
  await write(io.stdout, table(rows))
  return 0
}

// The figures stat shows only where usage() counts them, each [name, counts(figures),
// cell(figures, size)]: the bytes of removed versions not yet given back, and the trash.
const OPTIONAL_FIGURES = [
  ['reclaimable', (figures) => typeof figures.reclaimable === 'number', (figures, size) => size(figures.reclaimable)],
  ['trash', (figures) => figures.trash !== undefined, (figures, size) => `${size(figures.trash.bytes)} (${files(figures.trash.files)})`]
]

// Those of OPTIONAL_FIGURES that `usage` counts, as [name, cell].
const counted = (usage) => OPTIONAL_FIGURES.filter(([, counts]) => counts(usage)).map(([name, , cell]) => [name, cell])

// The bytes the filesystem holding `dir` has available to this process (statfs's bavail,
// which leaves out the blocks kept for root).
async function diskFreeBytes (dir) {
  const stats = await fs.statfs(dir)
  return stats.bavail * stats.bsize
}

// The room left: the store's (its capacity less what it holds) or the filesystem's, the
// smaller, saying which, with the other beside it.
function freeRoom (free, diskFree, size) {
  if (diskFree < free) return `${size(diskFree)} (available on the filesystem; ${size(free)} by the store's capacity)`
  return `${size(free)} (by the store's capacity; ${size(diskFree)} available on the filesystem)`
}

// Which process holds the store. One reached through its socket answered: the usage came
// from it. A store opened here read-only is held by nobody.
function holder (store) {
  const pid = store.heldBy
  if (pid === undefined) return 'none: read by this command, read-only'
  if (pid !== process.pid) return `process ${pid}, which answered`
  const took = store.takenOver ? ': the process that held it ended without closing it (killed or crashed), and this command took it over' : ''
  return `this command (process ${pid})${took || ': no other process held it'}`
}

// Lines go out in pieces of about 64 KiB: a write per line would cost more than the
// listing. What was listed is printed even when the listing then fails.
async function list (store, io, shard) {
  const { json } = io
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
  const before = await store.diskUsage()
  await store.compact()
  const after = await store.diskUsage()
  // Compacting writes a little (new manifests and logs): a store with nothing removed
  // may end slightly larger.
  const reclaimed = Math.max(0, before - after)
  if (io.json) await println(io.stdout, JSON.stringify({ before, after, reclaimed }))
  else if (reclaimed) await println(io.stdout, `reclaimed ${humanSize(reclaimed)}: disk space used by ${store.location}: ${humanSize(before)} before, ${humanSize(after)} after`)
  else await println(io.stdout, `nothing to reclaim: ${store.location} uses ${humanSize(after)} on disk`)
  return 0
}

async function verify (store, io, { shard }) {
  const { json } = io
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

async function repair (store, io, shard) {
  const result = await store.repair(shard)
  if (io.json) return println(io.stdout, JSON.stringify(result)).then(() => 0)
  for (const d of result.dropped) await println(io.stdout, `dropped ${d.key}: ${d.problem}`)
  for (const r of result.remade) await println(io.stdout, `kept ${r.key}: ${r.problem}`)
  for (const n of result.notes) await println(io.stdout, `cleared a damage note of ${n.at}: ${n.dropped.join('; ')}`)
  const lost = result.unaccounted ? `; ${files(result.unaccounted)} more lost without a trace` : ''
  await println(io.stdout, `shard ${shardName(shard)} repaired${result.recreated ? ' (recreated empty: its directory was gone)' : ''}: ` +
    `${files(result.files)} kept (${humanSize(result.used)}), ${result.dropped.length} dropped${lost}`)
  return 0
}

const files = (n) => `${n} file${n === 1 ? '' : 's'}`

// kfs trash KEY: the file goes to the trash; nothing is printed, as for unlink.
async function trashFile (store, io, key) {
  await store.trash(key)
  return 0
}

async function restoreTrash (store, io) {
  const restored = await store.restoreTrash()
  await println(io.stdout, io.json ? JSON.stringify(restored) : `restored ${files(restored.files)} (${humanSize(restored.bytes)}) from the trash`)
  return 0
}

// kfs empty-trash [--before DATE]: `before` a Date (program.js), absent for all.
async function emptyTrash (store, io, { before }) {
  const removed = await store.emptyTrash(before ? { before } : {})
  const which = before ? `trashed before ${before.toISOString()}` : 'in the trash'
  await println(io.stdout, io.json ? JSON.stringify(removed) : `removed ${files(removed.files)} (${humanSize(removed.bytes)}) ${which} for good`)
  return 0
}

// Where this process holds the store, a removed or replaced file's space comes back
// before it exits (the background reclaiming would come too late). The command is done
// by then: a failure here is a warning, and a later command or kfs compact reclaims it.
const reclaiming = (command) => async (store, io, ...args) => {
  const code = await command(store, io, ...args)
  if (store.heldBy !== process.pid) return code
  try {
    await store.reclaim()
  } catch (err) {
    await write(io.stderr, `kfs: warning: the disk space of what was removed is not given back yet (${describeError(err)}); a later command or kfs compact gives it back\n`)
  }
  return code
}

// The commands with a module of their own, each loaded when it runs (program.js reads
// commands[name] only then): a short command loads none of the others' code. A new
// command in lib/cli/NAME.js, exporting { NAME }, is one more line here.
const OWN_MODULE = {
  put: () => reclaiming(require('./put').put),
  metrics: () => require('./metrics').metrics,
  top: () => require('./top').top
}

module.exports = {
  get,
  unlink: reclaiming(unlink),
  exists,
  stat,
  list,
  compact,
  verify,
  repair,
  trash: trashFile,
  'restore-trash': restoreTrash,
  'empty-trash': reclaiming(emptyTrash)
}
for (const [name, load] of Object.entries(OWN_MODULE)) {
  let command
  Object.defineProperty(module.exports, name, { enumerable: true, get: () => (command = command || load()) })
}

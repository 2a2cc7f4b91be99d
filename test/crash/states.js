'use strict'

// Crash states: what a power cut at a given point of a recorded run (recordfs.py) can
// leave on disk, under four models of what a filesystem makes durable:
// - prefix: every call up to the cut, in order (a filesystem that never reorders);
// - journal: a file's data as of its last fsync; the names as of the last fsync of
//   anything, or as of the cut (a journal commit may come at any time), like ext4 in
//   its default data=ordered mode with delayed allocation;
// - posix: a file's data as of its last fsync; a directory's entries as of its last
//   fsync, and none of a directory never synced (POSIX's weakest reading: fsync of a
//   file does not make its name durable).
// - subset: posix, plus any subset of the calls since the last fsync of anything (the
//   kernel may write back whatever it holds, in any order). What it takes of them: all;
//   the writes alone; the names alone; all but one name call, for each (a name made
//   durable while an earlier one was not). A file's writes persist in order: a file
//   with writes from before that fsync not synced keeps only its synced data.
// A file whose data was never synced is empty; one never named durably is not there.

const fs = require('node:fs')
const path = require('node:path')

const ROOT = 1
const MODELS = ['prefix', 'journal', 'posix', 'subset']

function readLog (logDir) {
  const lines = fs.readFileSync(path.join(logDir, 'ops.jsonl'), 'utf8').split('\n').filter(Boolean)
  const entries = lines.map((line) => JSON.parse(line))
  const haves = entries.filter((e) => e.o === 'have')
  const ops = entries.filter((e) => e.o !== 'have')
  // Each id's content calls, by position: what "its first n content calls" means.
  const contentOps = new Map()
  ops.forEach((op, index) => {
    if (op.o !== 'w' && op.o !== 'trunc') return
    if (!contentOps.has(op.i)) contentOps.set(op.i, [])
    contentOps.get(op.i).push(index)
  })
  return { logDir, haves, ops, contentOps }
}

// How many of `id`'s content calls come before position `upTo`.
function contentCount (log, id, upTo) {
  const list = log.contentOps.get(id) || []
  let lo = 0
  let hi = list.length
  while (lo < hi) {
    const mid = (lo + hi) >> 1
    if (list[mid] < upTo) lo = mid + 1
    else hi = mid
  }
  return lo
}

function split (p) {
  return [path.posix.dirname(p), path.posix.basename(p)]
}

// Cut points (a cut at k keeps calls [0, k)): just before and just after every fsync,
// halfway between two fsyncs, and the end. Never between libfuse hiding a file that is
// open and the rename over its name that made it do so: one call on a disk.
function cutPoints (log) {
  const cuts = new Set([0, log.ops.length])
  let last = 0
  log.ops.forEach((op, i) => {
    if (op.o !== 'fsync' && op.o !== 'fsyncdir') return
    if (i - last > 1) cuts.add(last + ((i - last) >> 1))
    cuts.add(i)
    cuts.add(i + 1)
    last = i + 1
  })
  const splits = (k) => {
    const [hidden, next] = [log.ops[k - 1], log.ops[k]]
    return hidden && hidden.hidden && next && next.o === 'rename' && next.b === hidden.p
  }
  return [...cuts].filter((k) => !splits(k)).sort((a, b) => a - b)
}

// Yields { model, cut, entries, key } for each cut and model: entries are
// { path, type, id, n } (a file's first n content calls), parents before children;
// key is the same for the same disk.
function * crashStates (log, cuts = cutPoints(log)) {
  const dirs = new Map([[ROOT, new Map()]]) // now: id -> Map(name -> id)
  const types = new Map([[ROOT, 'd']])
  const resolve = (p, from = dirs) => {
    let id = ROOT
    for (const name of p.split('/').filter(Boolean)) {
      id = (from.get(id) || new Map()).get(name)
      if (id === undefined) return undefined
    }
    return id
  }
  for (const h of log.haves) {
    const [parent, name] = split(h.p)
    dirs.get(resolve(parent)).set(name, h.i)
    types.set(h.i, h.t)
    if (h.t === 'd') dirs.set(h.i, new Map())
  }
  const copy = (from) => new Map([...from].map(([id, entries]) => [id, new Map(entries)]))
  const posixDirs = copy(dirs) // each directory's entries as of its last fsync
  let journalDirs = copy(dirs) // every directory's entries as of the last fsync of anything
  const synced = new Map() // id -> position its data is durable as of
  const syncedAt = (id) => synced.get(id) || 0

  const walk = (from, upTo) => {
    const entries = []
    const seen = new Set()
    const visit = (id, p) => {
      for (const [name, child] of [...(from.get(id) || [])].sort()) {
        const childPath = p + '/' + name
        if (types.get(child) === 'd') {
          if (seen.has(child)) continue // a directory renamed into a place whose old name survives
          seen.add(child)
          entries.push({ path: childPath, type: 'd', id: child })
          visit(child, childPath)
        } else {
          entries.push({ path: childPath, type: 'f', id: child, n: contentCount(log, child, upTo(child)) })
        }
      }
    }
    visit(ROOT, '')
    return entries
  }
  const state = (model, cut, entries) => ({ model, cut, entries, key: JSON.stringify(entries.map((e) => [e.path, e.id, e.n])) })

  // The calls since the last fsync of anything: where they start, and their name calls
  // as changes to directories by id (a call acts on the directory it named then).
  let windowStart = 0
  let windowNames = []
  const nameChange = (op) => {
    const entry = (p) => {
      const [parent, name] = split(p)
      return [resolve(parent), name]
    }
    if (op.o === 'create' || op.o === 'link') return { set: [[...entry(op.p), op.i]], del: [] }
    if (op.o === 'rename') return { set: [[...entry(op.b), resolve(op.a)]], del: [entry(op.a)] }
    if (op.o === 'unlink' || op.o === 'rmdir') return { set: [], del: [entry(op.p)] }
    return undefined
  }
  const subsets = function * (k, posix) {
    // A file's window writes persist only if none of its writes before the window is
    // lost: its data then stays a prefix of what it was written.
    const withWrites = (id) => (contentCount(log, id, windowStart) === contentCount(log, id, syncedAt(id)) ? k : syncedAt(id))
    const apply = (changes) => {
      const out = copy(posixDirs)
      for (const { set, del } of changes) {
        for (const [parent, name] of del) if (out.has(parent)) out.get(parent).delete(name)
        for (const [parent, name, id] of set) {
          if (!out.has(parent)) out.set(parent, new Map())
          out.get(parent).set(name, id)
          if (types.get(id) === 'd' && !out.has(id)) out.set(id, new Map())
        }
      }
      return out
    }
    const seen = new Set([posix.key])
    const candidates = [
      walk(apply(windowNames), withWrites),
      walk(posixDirs, withWrites),
      walk(apply(windowNames), syncedAt),
      ...windowNames.map((_, skip) => walk(apply(windowNames.filter((__, j) => j !== skip)), withWrites))
    ]
    for (const entries of candidates) {
      const s = state('subset', k, entries)
      if (seen.has(s.key)) continue
      seen.add(s.key)
      yield s
    }
  }

  let next = 0
  const emit = function * (k) {
    yield state('prefix', k, walk(dirs, () => k))
    yield state('journal', k, walk(journalDirs, syncedAt))
    yield state('journal', k, walk(dirs, syncedAt))
    const posix = state('posix', k, walk(posixDirs, syncedAt))
    yield posix
    yield * subsets(k, posix)
  }
  for (let i = 0; i <= log.ops.length; i++) {
    while (next < cuts.length && cuts[next] === i) yield * emit(cuts[next++])
    const op = log.ops[i]
    if (!op) break
    const change = nameChange(op)
    const last = windowNames[windowNames.length - 1]
    if (change && op.o === 'rename' && last && last.hides === op.b) {
      // libfuse hid the file this rename replaces: one rename on a disk, one change.
      last.set.push(...change.set)
      last.del.push(...change.del)
      last.hides = undefined
    } else if (change) {
      windowNames.push({ ...change, hides: op.hidden ? op.p : undefined })
    }
    if (op.o === 'create') {
      const [parent, name] = split(op.p)
      dirs.get(resolve(parent)).set(name, op.i)
      types.set(op.i, op.t)
      if (op.t === 'd') dirs.set(op.i, new Map())
    } else if (op.o === 'link') {
      const [parent, name] = split(op.p)
      dirs.get(resolve(parent)).set(name, op.i)
    } else if (op.o === 'rename') {
      const id = resolve(op.a)
      const [from, oldName] = split(op.a)
      const [to, newName] = split(op.b)
      dirs.get(resolve(from)).delete(oldName)
      dirs.get(resolve(to)).set(newName, id)
    } else if (op.o === 'unlink' || op.o === 'rmdir') {
      const [parent, name] = split(op.p)
      dirs.get(resolve(parent)).delete(name)
    } else if (op.o === 'fsync') {
      synced.set(op.i, i)
      journalDirs = copy(dirs)
    } else if (op.o === 'fsyncdir') {
      const id = resolve(op.p)
      posixDirs.set(id, new Map(dirs.get(id)))
      journalDirs = copy(dirs)
    }
    if (op.o === 'fsync' || op.o === 'fsyncdir') {
      windowStart = i + 1
      windowNames = []
    }
  }
}

// Writes the state's files under `out`, as the disk would hold them. Names of one id
// are hard links of one file, as they were.
function materialize (log, snapshot, entries, out) {
  fs.mkdirSync(out, { recursive: true })
  const initial = new Map(log.haves.filter((h) => h.t === 'f').map((h) => [h.i, h.p]))
  const made = new Map()
  const data = fs.openSync(path.join(log.logDir, 'data.bin'), 'r')
  try {
    for (const e of entries) {
      const target = path.join(out, e.path)
      if (e.type === 'd') {
        fs.mkdirSync(target)
      } else if (made.has(e.id)) {
        fs.linkSync(made.get(e.id), target)
      } else {
        fs.writeFileSync(target, content(log, data, snapshot, initial, e.id, e.n))
        made.set(e.id, target)
      }
    }
  } finally {
    fs.closeSync(data)
  }
}

function content (log, data, snapshot, initial, id, n) {
  let bytes = initial.has(id) ? fs.readFileSync(path.join(snapshot, initial.get(id))) : Buffer.alloc(0)
  let size = bytes.length
  const grow = (to) => {
    if (to <= bytes.length) return
    const bigger = Buffer.alloc(Math.max(to, bytes.length * 2))
    bytes.copy(bigger, 0, 0, size)
    bytes = bigger
  }
  for (const index of (log.contentOps.get(id) || []).slice(0, n)) {
    const op = log.ops[index]
    if (op.o === 'w') {
      grow(op.off + op.n)
      if (op.off > size) bytes.fill(0, size, op.off)
      fs.readSync(data, bytes, op.off, op.n, op.d)
      size = Math.max(size, op.off + op.n)
    } else {
      grow(op.n)
      if (op.n > size) bytes.fill(0, size, op.n)
      size = op.n
    }
  }
  return bytes.subarray(0, size)
}

// What a reader may find of a step's version: its SHA-256, or absent (null) once its
// expiry passed, as it has for the short ones by the time states are checked.
const read = (o) => (o.expires !== undefined && o.expires <= Date.now() ? null : o.sha256)

// What may be read for each key after a cut at k: the outcome of the last step on it
// that resolved synced before the cut (or, with none, its absence), or of any step on
// it that began after that one and before the cut. null is "absent". Steps on one key
// never overlap in the workloads. `before`: the outcomes of steps run before the
// recording, durable when it started.
function expectations (log, outcomes, k, before = []) {
  const began = new Set()
  const acked = new Set()
  let opened = false
  log.ops.slice(0, k).forEach((op) => {
    if (op.o !== 'mark') return
    const [what, n] = op.t.split(' ')
    if (n === 'open') opened = opened || what === 'ack'
    else if (what === 'begin') began.add(Number(n))
    else if (what === 'ack') acked.add(Number(n))
  })
  const keys = new Map()
  for (const o of before) keys.set(o.key, { allowed: [read(o)] })
  outcomes.forEach((o, n) => {
    if (!keys.has(o.key)) keys.set(o.key, { allowed: [null] })
    if (!began.has(n)) return
    if (acked.has(n) && o.sync) keys.set(o.key, { allowed: [read(o)] })
    else keys.get(o.key).allowed.push(read(o))
  })
  return { opened, keys }
}

// The promises a checked state broke, as strings: none is a pass.
function judge (expected, found) {
  if (!found.opened) return [`did not open: ${found.error}`]
  const broken = []
  for (const [key, { allowed }] of expected.keys) {
    const read = found.reads[key]
    const value = read === 'ENOENT' ? null : read
    if (!allowed.includes(value)) broken.push(`${key}: read ${read && read.length === 64 ? read.slice(0, 12) : read}, allowed ${allowed.map((a) => (a ? a.slice(0, 12) : 'absent')).join(' or ')}`)
  }
  return broken
}

module.exports = { MODELS, readLog, cutPoints, crashStates, materialize, expectations, judge }

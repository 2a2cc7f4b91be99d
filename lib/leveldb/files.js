'use strict'

// Reads a LevelDB database that no process has open from its files alone (LevelDB 1.20
// cannot open one without writing: read-only.js). Nothing in it is written or renamed.
// As LevelDB 1.20 writes them (doc/table_format.md, doc/log_format.md): CURRENT names the
// manifest, a log of VersionEdits naming the live tables and the first log not yet in a
// table; a table is blocks of prefix-compressed entries, an index block and a 48-byte
// footer; a log is WriteBatches. Every key is internal: the user's key, then 8 bytes of
// sequence number and type. Per user key, the entry with the highest sequence number of
// all tables and logs is the key's, and a deletion hides it.
// Whatever it does not know rejects with `reason` 'unreadable' or an OS error: a
// compressed block, a bad checksum (all are checked), a record cut short, a file gone
// (compacted meanwhile), a database a process holds, links an interrupted open left. The
// caller then reads through LevelDB, which knows what to do with them.
const path = require('node:path')
const { crc32c, unmask } = require('./crc32c')
const { unreadable, uint64, lengthPrefixed, DELETION, VALUE } = require('./coding')
const { readdir, stat, readWhole, Opened } = require('./file-io')
const { Table, ListCursor } = require('./table-file')
const { decodeEdit } = require('./manifest')
const { lockHeld, logName } = require('./log-guard')

const COMPARATOR = 'leveldb.BytewiseComparator'
const LOG_FILE = /^(\d+)\.log$/
const KEPT_FILE = /^kfs-kept-\d+\.log$/

// Keys are latin1 strings of their bytes: JavaScript's string order is LevelDB's bytewise
// order, and no Buffer is made.
const latin1 = (key) => Buffer.from(key).toString('latin1') // a string as UTF-8, as leveldown stores it
// As leveldown reads it back (UTF-8).
const utf8 = (key) => (/[\u0080-\u00ff]/.test(key) ? Buffer.from(key, 'latin1').toString() : key)

// A key range of user keys: { gt or gte, lt or lte }, strings or Buffers.
class Range {
  constructor ({ gt, gte, lt, lte }) {
    this.low = latin1(gt ?? gte ?? '')
    this.lowIncluded = gt === undefined
    this.high = lt ?? lte
    this.high = this.high === undefined ? undefined : latin1(this.high)
    this.highIncluded = lt === undefined
  }

  above (key) {
    return key > this.low || (key === this.low && this.lowIncluded)
  }

  past (key) {
    return this.high !== undefined && (key > this.high || (key === this.high && !this.highIncluded))
  }
}

// The database at `dir` as its files hold it now, for reads within `range`: its live
// tables and its logs' entries in the range. Holds no file open between reads.
class DbFiles {
  #tables // Table
  #logged // the logs' entries in the range, in internal key order

  constructor (tables, logged) {
    this.#tables = tables
    this.#logged = logged
  }

  static async open (dir, range) {
    range = new Range(range)
    const names = await readdir(dir)
    if (names.some((name) => KEPT_FILE.test(name))) throw unreadable(`${dir}: an interrupted open left logs to restore`)
    if (!names.includes('CURRENT')) throw unreadable(`${dir}: no CURRENT file`)
    if (await lockHeld(dir, { recent: true })) throw unreadable(`${dir}: a process holds it`)
    const current = (await readWhole(path.join(dir, 'CURRENT'))).toString('latin1')
    if (!/^MANIFEST-\d+\n$/.test(current)) throw unreadable(`${dir}: CURRENT does not name a manifest`)
    const state = manifestState(await readWhole(path.join(dir, current.slice(0, -1))), dir)
    const tables = []
    for (const table of state.tables.values()) {
      const base = String(table.number).padStart(6, '0')
      const name = [`${base}.ldb`, `${base}.sst`].find((n) => names.includes(n))
      // LevelDB's open fails or power-cut.js puts it right, whatever keys it holds.
      if (!name) throw unreadable(`${dir}: table ${table.number} is missing`)
      if (overlaps(table, range)) tables.push(new Table(path.join(dir, name), table.size))
    }
    const logs = names.map((name) => LOG_FILE.exec(name)).filter(Boolean).map((m) => Number(m[1]))
      .filter((n) => n >= state.logNumber || n === state.prevLogNumber).sort((a, b) => a - b)
    const logged = []
    for (const n of logs) {
      const file = path.join(dir, logName(n))
      if ((await stat(file)).size === 0) continue // as every log is once its shard closed
      for (const record of logRecords(await readWhole(file), file)) batchEntries(record, range, logged, file)
    }
    logged.sort(internalOrder)
    return new DbFiles(tables, logged)
  }

  // Up to `limit` live entries { key, value } (UTF-8 strings) in `range`, in key order.
  async read (range, limit) {
    range = new Range(range)
    const opened = new Opened()
    try {
      const sources = [new ListCursor(this.#logged, range), ...(await Promise.all(this.#tables.map((table) => table.cursor(range, opened))))]
      await Promise.all(sources.map((source) => source.fill()))
      const live = []
      let last
      while (live.length < limit) {
        let next
        for (const source of sources) {
          const entry = source.peek()
          if (entry && (!next || internalOrder(entry, next.peek()) < 0)) next = source
        }
        if (!next) break
        const entry = next.take()
        if (next.wanting()) await next.fill()
        if (entry.key === last) continue // an older entry of the key
        last = entry.key
        if (entry.type === VALUE) live.push({ key: utf8(entry.key), value: entry.value })
      }
      return live
    } finally {
      await opened.close()
    }
  }
}

// User key ascending, then sequence number descending: the newest entry of a key first.
const internalOrder = (a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : b.seq - a.seq)

function overlaps (table, range) {
  const { smallest, largest } = table
  return range.above(largest.toString('latin1', 0, largest.length - 8)) && !range.past(smallest.toString('latin1', 0, smallest.length - 8))
}

// { logNumber, prevLogNumber, tables (number -> manifest.js's table) }, as
// VersionSet::Recover replays it.
function manifestState (buffer, dir) {
  const file = `${dir}: its manifest`
  const state = { logNumber: undefined, prevLogNumber: 0, nextFile: undefined, tables: new Map() }
  for (const record of logRecords(buffer, file)) {
    let edit
    try {
      edit = decodeEdit(record, 0)
    } catch (err) {
      throw unreadable(`${file}: ${err.message}`)
    }
    if (edit.comparator !== undefined && edit.comparator !== COMPARATOR) throw unreadable(`${file}: comparator ${edit.comparator}`)
    for (const field of ['logNumber', 'prevLogNumber', 'nextFile']) if (edit[field] !== undefined) state[field] = edit[field]
    for (const n of edit.deleted) state.tables.delete(n)
    for (const table of edit.tables) state.tables.set(table.number, table)
  }
  if (state.logNumber === undefined || state.nextFile === undefined) throw unreadable(`${file} lacks a log or next file number`)
  return state
}

// LevelDB's log format (manifest.js), read strictly: the CRC-32C covers type and payload;
// a torn tail or bad CRC, where LevelDB would drop records, is unreadable.
const BLOCK = 32768
const HEADER = 7
const [FULL, FIRST, MIDDLE, LAST] = [1, 2, 3, 4]

function * logRecords (buffer, file) {
  let parts
  for (let block = 0; block < buffer.length; block += BLOCK) {
    const end = Math.min(block + BLOCK, buffer.length)
    let pos = block
    for (; end - pos >= HEADER; pos += HEADER + buffer.readUInt16LE(pos + 4)) {
      const length = buffer.readUInt16LE(pos + 4)
      const type = buffer[pos + 6]
      if (pos + HEADER + length > end) throw unreadable(`${file}: a record runs past its block at byte ${pos}`)
      if (crc32c(buffer, pos + 6, pos + HEADER + length) !== unmask(buffer.readUInt32LE(pos))) throw unreadable(`${file}: the record at byte ${pos} does not match its checksum`)
      const payload = buffer.subarray(pos + HEADER, pos + HEADER + length)
      if (type === FULL && !parts) yield payload
      else if (type === FIRST && !parts) parts = [payload]
      else if (type === MIDDLE && parts) parts.push(payload)
      else if (type === LAST && parts) {
        yield Buffer.concat([...parts, payload])
        parts = undefined
      } else throw unreadable(`${file}: a record of type ${type} out of place at byte ${pos}`)
    }
    if (end < block + BLOCK && pos < end) throw unreadable(`${file}: ends inside a record header`)
  }
  if (parts) throw unreadable(`${file}: ends inside a record`)
}

// A WriteBatch (write_batch.cc): sequence number (fixed64), count (fixed32), then each
// entry: its type, its key, and for a put its value (varint-prefixed). Adds to `into`
// the entries with keys in `range`, as { key, seq, type, value } (latin1, UTF-8).
function batchEntries (record, range, into, file) {
  if (record.length < 12) throw unreadable(`${file}: a batch of ${record.length} bytes`)
  const input = { buffer: record, pos: 12 }
  const seq = uint64(record, 0)
  const count = record.readUInt32LE(8)
  let n = 0
  for (; input.pos < record.length; n++) {
    const type = record[input.pos++]
    if (type !== VALUE && type !== DELETION) throw unreadable(`${file}: a batch entry of type ${type}`)
    const [keyStart, keyEnd] = lengthPrefixed(input)
    const [valueStart, valueEnd] = type === VALUE ? lengthPrefixed(input) : [0, 0]
    const key = record.toString('latin1', keyStart, keyEnd)
    if (range.above(key) && !range.past(key)) into.push({ key, seq: seq + n, type, value: record.toString('utf8', valueStart, valueEnd) })
  }
  if (n !== count) throw unreadable(`${file}: a batch of ${n} entries says ${count}`)
}

module.exports = { DbFiles }

'use strict'

// Reads a LevelDB database that no process has open from its files alone: LevelDB 1.20
// cannot open one without writing to it (a new manifest and CURRENT, synced: see
// read-only.js). Nothing in the directory is written, renamed or synced.
//
// The files, as LevelDB 1.20 writes them (doc/table_format.md, doc/log_format.md in
// google/leveldb): CURRENT names the manifest; the manifest, a log of VersionEdits,
// names the live tables and the first log not yet in a table; a table is blocks of
// prefix-compressed entries, an index block (a key at or past each block's last, and
// where that block is) and a 48-byte footer; a log is WriteBatches (puts and deletions
// from a sequence number on). Every key is an internal key: the user's key, then 8
// bytes of sequence number and type. The entries of all tables and logs are merged as
// LevelDB's iterators merge them: per user key, the entry with the highest sequence
// number is the key's, and a deletion hides the key.
//
// Whatever it does not know as LevelDB 1.20 writes it rejects, with `reason`
// 'unreadable' or an OS error: a compressed block (kfs writes none), a checksum that
// does not match (every block and log record read is checked), a record cut short, a
// file gone meanwhile (LevelDB compacts while a database is open, in this process or
// another), a database a process holds, links an interrupted open left (log-guard.js).
// The caller then reads through LevelDB, which knows what to do with them, and reports
// damage as it does.
const fs = require('node:fs/promises')
const path = require('node:path')
const { crc32c, unmask } = require('./crc32c')
const { decodeEdit } = require('./manifest')
const { lockHeld, logName } = require('./log-guard')

const COMPARATOR = 'leveldb.BytewiseComparator'
const [DELETION, VALUE] = [0, 1]
const LOG_FILE = /^(\d+)\.log$/
const KEPT_FILE = /^kfs-kept-\d+\.log$/
const FOOTER = 48
const TRAILER = 5 // a block's type byte and masked CRC-32C
const TAIL = 64 * 1024 // read from a table's end at once: its footer, and its index block most often
const SPAN = 256 * 1024 // the most of a table's consecutive data blocks read at once

const unreadable = (what) => Object.assign(new Error(what), { reason: 'unreadable' })

// A key range of user keys: { gt or gte, lt or lte }, strings or Buffers.
class Range {
  constructor ({ gt, gte, lt, lte }) {
    this.low = Buffer.from(gt ?? gte ?? '')
    this.lowIncluded = gt === undefined
    this.high = lt ?? lte
    this.high = this.high === undefined ? undefined : Buffer.from(this.high)
    this.highIncluded = lt === undefined
  }

  // Whether buffer[start, end) is past the range's low end.
  above (buffer, start, end) {
    const c = buffer.compare(this.low, 0, this.low.length, start, end)
    return c > 0 || (c === 0 && this.lowIncluded)
  }

  // Whether buffer[start, end) is past the range's high end.
  past (buffer, start, end) {
    if (this.high === undefined) return false
    const c = buffer.compare(this.high, 0, this.high.length, start, end)
    return c > 0 || (c === 0 && !this.highIncluded)
  }

  has (key) {
    return this.above(key, 0, key.length) && !this.past(key, 0, key.length)
  }
}

// The database at `dir` as its files hold it now, for reads of keys in `range` (any
// read's range must lie within it): its live tables, and the entries of its logs in
// the range. Holds no file open between reads.
class DbFiles {
  #tables // Table
  #logged // the logs' entries in the range, in internal key order

  constructor (tables, logged) {
    this.#tables = tables
    this.#logged = logged
  }

  static async open (dir, range) {
    range = new Range(range)
    const names = await fs.readdir(dir)
    if (names.some((name) => KEPT_FILE.test(name))) throw unreadable(`${dir}: an interrupted open left logs to restore`)
    if (!names.includes('CURRENT')) throw unreadable(`${dir}: no CURRENT file`)
    if (await lockHeld(dir)) throw unreadable(`${dir}: a process holds it`)
    const current = await fs.readFile(path.join(dir, 'CURRENT'), 'latin1')
    if (!/^MANIFEST-\d+\n$/.test(current)) throw unreadable(`${dir}: CURRENT does not name a manifest`)
    const state = manifestState(await fs.readFile(path.join(dir, current.slice(0, -1))), dir)
    const tables = []
    for (const table of state.tables.values()) {
      const base = String(table.number).padStart(6, '0')
      const name = [`${base}.ldb`, `${base}.sst`].find((n) => names.includes(n))
      // LevelDB's open fails ("missing files"), or kfs puts right what a power cut left
      // (power-cut.js), whatever keys the table holds.
      if (!name) throw unreadable(`${dir}: table ${table.number} is missing`)
      if (overlaps(table, range)) tables.push(new Table(path.join(dir, name), table.size))
    }
    const logs = names.map((name) => LOG_FILE.exec(name)).filter(Boolean).map((m) => Number(m[1]))
      .filter((n) => n >= state.logNumber || n === state.prevLogNumber).sort((a, b) => a - b)
    const logged = []
    for (const n of logs) {
      const file = path.join(dir, logName(n))
      for (const record of logRecords(await fs.readFile(file), file)) batchEntries(record, range, logged, file)
    }
    logged.sort(internalOrder)
    return new DbFiles(tables, logged)
  }

  // Up to `limit` live entries { key, value } (Buffers) with keys in `range`, in key order.
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
        await next.fill()
        if (last && last.equals(entry.key)) continue // an older entry of the key
        last = entry.key
        if (entry.type === VALUE) live.push({ key: entry.key, value: entry.value })
      }
      return live
    } finally {
      await opened.close()
    }
  }
}

// User key ascending, then sequence number descending: the newest entry of a key first.
const internalOrder = (a, b) => Buffer.compare(a.key, b.key) || b.seq - a.seq

function overlaps (table, range) {
  const { smallest, largest } = table
  return range.above(largest, 0, largest.length - 8) && !range.past(smallest, 0, smallest.length - 8)
}

// The manifest's last state: { logNumber, prevLogNumber, tables (number -> { level,
// number, size, smallest, largest }) }, as LevelDB's VersionSet::Recover replays it.
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

// LevelDB's log format: 32 KiB blocks of records, each a 7-byte header (masked CRC-32C
// of the type and payload, length LE16, type) and payload; a record split over blocks
// comes as FIRST, MIDDLE..., LAST. A block's last 6 bytes or fewer are padding. Strict:
// anything else (a torn tail a crash left, a bad CRC) is unreadable, where LevelDB
// would drop records.
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
// the entries with keys in `range`, as { key, seq, type, value }.
function batchEntries (record, range, into, file) {
  if (record.length < 12) throw unreadable(`${file}: a batch of ${record.length} bytes`)
  const input = { buffer: record, pos: 12 }
  const seq = uint64(record, 0)
  const count = record.readUInt32LE(8)
  let n = 0
  for (; input.pos < record.length; n++) {
    const type = record[input.pos++]
    if (type !== VALUE && type !== DELETION) throw unreadable(`${file}: a batch entry of type ${type}`)
    const [keyStart, keyEnd] = slice(input)
    const [valueStart, valueEnd] = type === VALUE ? slice(input) : [0, 0]
    if (range.above(record, keyStart, keyEnd) && !range.past(record, keyStart, keyEnd)) {
      into.push({ key: Buffer.from(record.subarray(keyStart, keyEnd)), seq: seq + n, type, value: Buffer.from(record.subarray(valueStart, valueEnd)) })
    }
  }
  if (n !== count) throw unreadable(`${file}: a batch of ${n} entries says ${count}`)
}

// A table file of `size` bytes (the manifest's). Its index is read once.
class Table {
  #index // [{ last: the user key every entry of the block is at most, offset, size }]

  constructor (file, size) {
    this.file = file
    this.size = size
  }

  // A cursor over its entries in `range`, from the first block that may hold one.
  async cursor (range, opened) {
    const index = this.#index || (this.#index = await this.#readIndex(opened))
    // The blocks before hold keys below the range.
    const first = firstWhere(index, (block) => range.above(block.last, 0, block.last.length))
    return new TableCursor(this, index, first, range, opened)
  }

  async #readIndex (opened) {
    const handle = await opened.open(this.file)
    const tailStart = Math.max(0, this.size - TAIL)
    const tail = await readAt(handle, tailStart, this.size - tailStart, this.file)
    if (tail.length < FOOTER || tail.readUInt32LE(tail.length - 8) !== 0x8b80fb57 || tail.readUInt32LE(tail.length - 4) !== 0xdb477524) {
      throw unreadable(`${this.file}: no table footer`)
    }
    const input = { buffer: tail, pos: tail.length - FOOTER }
    varint(input) // the metaindex block: its offset and size
    varint(input)
    const offset = varint(input)
    const size = varint(input)
    const block = offset >= tailStart ? tail.subarray(offset - tailStart, offset - tailStart + size + TRAILER) : await readAt(handle, offset, size + TRAILER, this.file)
    const index = []
    decodeBlock(checked(block, 0, size, this.file), (key, keyLength, value, valueStart, valueEnd) => {
      if (keyLength < 8) throw unreadable(`${this.file}: an index key of ${keyLength} bytes`)
      const input = { buffer: value.subarray(valueStart, valueEnd), pos: 0 }
      index.push({ last: Buffer.from(key.subarray(0, keyLength - 8)), offset: varint(input), size: varint(input) })
    })
    return index
  }
}

// Entries a source holds in internal key order, taken one at a time: fill() before
// peek() after each take().
class ListCursor {
  constructor (entries, range) {
    this.entries = entries
    this.pos = firstWhere(entries, (entry) => range.above(entry.key, 0, entry.key.length))
    this.end = firstWhere(entries, (entry) => range.past(entry.key, 0, entry.key.length))
  }

  peek () {
    return this.pos < this.end ? this.entries[this.pos] : undefined
  }

  take () {
    return this.entries[this.pos++]
  }

  async fill () {}
}

// A table's entries in a range, read a span of consecutive blocks at a time.
class TableCursor extends ListCursor {
  #table
  #index
  #next // the next block to read
  #range
  #opened
  #done = false

  constructor (table, index, first, range, opened) {
    super([], range)
    this.#table = table
    this.#index = index
    this.#next = first
    this.#range = range
    this.#opened = opened
  }

  async fill () {
    while (this.pos >= this.end && !this.#done) await this.#readSpan()
  }

  async #readSpan () {
    const index = this.#index
    const first = this.#next
    if (first >= index.length) {
      this.#done = true
      return
    }
    let last = first
    while (last + 1 < index.length && index[last + 1].offset + index[last + 1].size + TRAILER - index[first].offset <= SPAN) last++
    const start = index[first].offset
    const span = await readAt(await this.#opened.open(this.#table.file), start, index[last].offset + index[last].size + TRAILER - start, this.#table.file)
    const entries = []
    const range = this.#range
    for (let i = first; i <= last && !this.#done; i++) {
      const block = checked(span, index[i].offset - start, index[i].size, this.#table.file)
      decodeBlock(block, (key, keyLength, value, valueStart, valueEnd) => {
        if (keyLength < 8) throw unreadable(`${this.#table.file}: a key of ${keyLength} bytes`)
        const userEnd = keyLength - 8
        if (this.#done || !range.above(key, 0, userEnd)) return
        if (range.past(key, 0, userEnd)) {
          this.#done = true
          return
        }
        const type = key[userEnd]
        if (type !== VALUE && type !== DELETION) throw unreadable(`${this.#table.file}: an entry of type ${type}`)
        entries.push({ key: Buffer.from(key.subarray(0, userEnd)), seq: Math.floor(uint64(key, userEnd) / 256), type, value: value.subarray(valueStart, valueEnd) })
      })
      // Blocks past this one hold keys at or past its last.
      if (range.past(index[i].last, 0, index[i].last.length)) this.#done = true
    }
    this.#next = last + 1
    this.entries = entries
    this.pos = 0
    this.end = entries.length
  }
}

// The contents of the block at buffer[start, start + size), once its trailer says it is
// uncompressed and its checksum matches.
function checked (buffer, start, size, file) {
  if (start + size + TRAILER > buffer.length) throw unreadable(`${file}: a block runs past the file's end`)
  if (buffer[start + size] !== 0) throw unreadable(`${file}: a compressed block`)
  if (crc32c(buffer, start, start + size + 1) !== unmask(buffer.readUInt32LE(start + size + 1))) throw unreadable(`${file}: a block does not match its checksum`)
  return buffer.subarray(start, start + size)
}

// A block's entries (table/block.cc): each the length of the key it shares with the one
// before, the lengths of the rest and of the value, the rest of the key and the value;
// then restart offsets (fixed32 each) and their count. Calls visit(key, keyLength, block,
// valueStart, valueEnd) for each, `key` a buffer reused from entry to entry.
let scratch = Buffer.alloc(256)

function decodeBlock (block, visit) {
  if (block.length < 4) throw unreadable(`a block of ${block.length} bytes`)
  const end = block.length - 4 - 4 * block.readUInt32LE(block.length - 4)
  if (end < 0) throw unreadable('a block\'s restart array is larger than the block')
  const input = { buffer: block, pos: 0 }
  let keyLength = 0
  while (input.pos < end) {
    const shared = varint(input)
    const rest = varint(input)
    const valueLength = varint(input)
    if (shared > keyLength || input.pos + rest + valueLength > end) throw unreadable('a block entry runs past its block')
    if (shared + rest > scratch.length) scratch = Buffer.concat([scratch.subarray(0, shared), Buffer.alloc(2 * (shared + rest))])
    block.copy(scratch, shared, input.pos, input.pos + rest)
    keyLength = shared + rest
    input.pos += rest
    visit(scratch, keyLength, block, input.pos, input.pos + valueLength)
    input.pos += valueLength
  }
}

// The first index of a sorted `array` whose element meets `test`, which every element
// after it meets too (array.length if none does).
function firstWhere (array, test) {
  let low = 0
  let high = array.length
  while (low < high) {
    const middle = (low + high) >>> 1
    if (test(array[middle])) high = middle
    else low = middle + 1
  }
  return low
}

const uint64 = (buffer, at) => buffer.readUInt32LE(at) + buffer.readUInt32LE(at + 4) * 0x100000000

// Varint32 or varint64, by arithmetic: exact up to 2^53.
function varint (input) {
  let value = 0
  for (let shift = 0; shift < 64; shift += 7) {
    if (input.pos >= input.buffer.length) throw unreadable('a varint cut short')
    const byte = input.buffer[input.pos++]
    value += (byte & 0x7f) * 2 ** shift
    if (byte < 0x80) return value
  }
  throw unreadable('an overlong varint')
}

// A varint-prefixed string: its [start, end) in input.buffer.
function slice (input) {
  const length = varint(input)
  if (input.pos + length > input.buffer.length) throw unreadable('a string runs past its record')
  input.pos += length
  return [input.pos - length, input.pos]
}

async function readAt (handle, position, length, file) {
  const buffer = Buffer.allocUnsafe(length)
  const { bytesRead } = await handle.read(buffer, 0, length, position)
  if (bytesRead !== length) throw unreadable(`${file}: shorter than the manifest says`)
  return buffer
}

// The files one read opened, each once, all closed at its end.
class Opened {
  #handles = new Map()

  open (file) {
    if (!this.#handles.has(file)) {
      const handle = fs.open(file, 'r')
      handle.catch(() => {})
      this.#handles.set(file, handle)
    }
    return this.#handles.get(file)
  }

  async close () {
    await Promise.all([...this.#handles.values()].map((handle) => handle.then((h) => h.close(), () => {})))
  }
}

module.exports = { DbFiles }

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
const fs = require('node:fs')
const path = require('node:path')
const { promisify } = require('node:util')
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

// File descriptors rather than FileHandles: a listing reads a few small files of each
// of up to 256 shards, and a FileHandle's making and closing cost more than the read.
const [readdir, open, close, stat] = [fs.readdir, fs.open, fs.close, fs.stat].map((fn) => promisify(fn))
const read = (fd, buffer, offset, length, position) => new Promise((resolve, reject) => {
  fs.read(fd, buffer, offset, length, position, (err, bytesRead) => (err ? reject(err) : resolve(bytesRead)))
})

const unreadable = (what) => Object.assign(new Error(what), { reason: 'unreadable' })

// Keys are handled as latin1 strings of their bytes: one character per byte, so that
// JavaScript's string order is LevelDB's bytewise order, and none is a Buffer to make.
const latin1 = (key) => Buffer.from(key).toString('latin1') // a string as UTF-8, as leveldown stores it
// Such a key as leveldown reads it back (UTF-8); most keys are ASCII, the same.
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

  // Whether `key` is past the range's low end.
  above (key) {
    return key > this.low || (key === this.low && this.lowIncluded)
  }

  // Whether `key` is past the range's high end.
  past (key) {
    return this.high !== undefined && (key > this.high || (key === this.high && !this.highIncluded))
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
      if ((await stat(file)).size === 0) continue // as every log is once its shard closed
      for (const record of logRecords(await readWhole(file), file)) batchEntries(record, range, logged, file)
    }
    logged.sort(internalOrder)
    return new DbFiles(tables, logged)
  }

  // Up to `limit` live entries { key, value } (strings, UTF-8) with keys in `range`, in
  // key order.
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
    const [keyStart, keyEnd] = slice(input)
    const [valueStart, valueEnd] = type === VALUE ? slice(input) : [0, 0]
    const key = record.toString('latin1', keyStart, keyEnd)
    if (range.above(key) && !range.past(key)) into.push({ key, seq: seq + n, type, value: record.toString('utf8', valueStart, valueEnd) })
  }
  if (n !== count) throw unreadable(`${file}: a batch of ${n} entries says ${count}`)
}

// A table file of `size` bytes (the manifest's). Its index is read once.
class Table {
  #index // [{ last: the user key every entry of the block is at most, offset, size }]
  #span // { start, buffer }: the bytes last read, kept for the next page; the whole file if no larger than TAIL

  constructor (file, size) {
    this.file = file
    this.size = size
  }

  // A cursor over its entries in `range`, from the first block that may hold one.
  async cursor (range, opened) {
    const index = this.#index || (this.#index = await this.#readIndex(opened))
    // The blocks before hold keys below the range.
    const first = firstWhere(index, (block) => range.above(block.last))
    return new TableCursor(this, index, first, range, opened)
  }

  async #readIndex (opened) {
    const fd = await opened.open(this.file)
    const tailStart = Math.max(0, this.size - TAIL)
    const tail = await readAt(fd, tailStart, this.size - tailStart, this.file)
    if (tailStart === 0) this.#span = { start: 0, buffer: tail }
    if (tail.length < FOOTER || tail.readUInt32LE(tail.length - 8) !== 0x8b80fb57 || tail.readUInt32LE(tail.length - 4) !== 0xdb477524) {
      throw unreadable(`${this.file}: no table footer`)
    }
    const input = { buffer: tail, pos: tail.length - FOOTER }
    varint(input) // the metaindex block: its offset and size
    varint(input)
    const offset = varint(input)
    const size = varint(input)
    this.#within(offset, size)
    const block = offset >= tailStart ? tail.subarray(offset - tailStart, offset - tailStart + size + TRAILER) : await readAt(fd, offset, size + TRAILER, this.file)
    const index = []
    decodeBlock(checked(block, 0, size, this.file), (key, keyLength, value, valueStart, valueEnd) => {
      if (keyLength < 8) throw unreadable(`${this.file}: an index key of ${keyLength} bytes`)
      const input = { buffer: value.subarray(valueStart, valueEnd), pos: 0 }
      const block = { last: key.toString('latin1', 0, keyLength - 8), offset: varint(input), size: varint(input) }
      this.#within(block.offset, block.size)
      index.push(block)
    })
    return index
  }

  // Rejects unless the block at `offset` of `size` bytes lies within the file: a
  // damaged handle must not have gigabytes read.
  #within (offset, size) {
    if (offset + size + TRAILER > this.size) throw unreadable(`${this.file}: a block handle past the file's end`)
  }

  // The bytes read last, if they hold the byte at `offset`: { start, buffer }.
  kept (offset) {
    const span = this.#span
    return span && offset >= span.start && offset < span.start + span.buffer.length ? span : undefined
  }

  // `length` bytes from `start` on, kept.
  async read (start, length, opened) {
    this.#span = { start, buffer: await readAt(await opened.open(this.file), start, length, this.file) }
    return this.#span
  }
}

// Entries a source holds in internal key order, taken one at a time: fill() before the
// first peek(), and after a take() when wanting() (a promise per entry would cost more
// than the entry).
class ListCursor {
  constructor (entries, range) {
    this.entries = entries
    this.pos = firstWhere(entries, (entry) => range.above(entry.key))
    this.end = firstWhere(entries, (entry) => range.past(entry.key))
  }

  peek () {
    return this.pos < this.end ? this.entries[this.pos] : undefined
  }

  take () {
    return this.entries[this.pos++]
  }

  wanting () {
    return false
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
  #entered = false // an entry above the range's low end was met: those after are too

  constructor (table, index, first, range, opened) {
    super([], range)
    this.#table = table
    this.#index = index
    this.#next = first
    this.#range = range
    this.#opened = opened
  }

  wanting () {
    return this.pos >= this.end && !this.#done
  }

  async fill () {
    while (this.wanting()) await this.#readSpan()
  }

  async #readSpan () {
    const index = this.#index
    const first = this.#next
    if (first >= index.length) {
      this.#done = true
      return
    }
    const end = (i) => index[i].offset + index[i].size + TRAILER
    // The blocks the bytes kept from the page before hold, else up to SPAN bytes of them.
    let span = this.#table.kept(index[first].offset)
    let last = first
    const limit = span ? span.start + span.buffer.length : index[first].offset + SPAN
    while (last + 1 < index.length && end(last + 1) <= limit) last++
    if (!span || end(last) > limit) span = await this.#table.read(index[first].offset, end(last) - index[first].offset, this.#opened)
    const entries = []
    const range = this.#range
    for (let i = first; i <= last && !this.#done; i++) {
      const block = checked(span.buffer, index[i].offset - span.start, index[i].size, this.#table.file)
      // Blocks past this one hold keys at or past its last.
      const ends = range.past(index[i].last)
      decodeBlock(block, (key, keyLength, value, valueStart, valueEnd) => {
        if (keyLength < 8) throw unreadable(`${this.#table.file}: a key of ${keyLength} bytes`)
        if (this.#done) return
        const userEnd = keyLength - 8
        const user = key.latin1Slice(0, userEnd)
        if (!this.#entered && !(this.#entered = range.above(user))) return
        if (ends && range.past(user)) {
          this.#done = true
          return
        }
        const type = key[userEnd]
        if (type !== VALUE && type !== DELETION) throw unreadable(`${this.#table.file}: an entry of type ${type}`)
        entries.push({ key: user, seq: Math.floor(uint64(key, userEnd) / 256), type, value: value.utf8Slice(valueStart, valueEnd) })
      })
      if (ends) this.#done = true
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
    for (let i = 0; i < rest; i++) scratch[shared + i] = block[input.pos + i] // shorter than a call to copy()
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

async function readAt (fd, position, length, file) {
  const buffer = Buffer.allocUnsafe(length)
  const bytesRead = await read(fd, buffer, 0, length, position)
  if (bytesRead !== length) throw unreadable(`${file}: shorter than the manifest says`)
  return buffer
}

// The whole of a file, with no more calls than needed for a small one: a read shorter
// than asked is taken for its end (a file that grew meanwhile, read short, ends inside a
// record, which the reader does not read).
async function readWhole (file) {
  const fd = await open(file, 'r')
  try {
    const parts = []
    // From Node's pool first (under 4 KiB): CURRENT and most manifests fit.
    for (let size = 4095; ; size = Math.min(2 * size + 1, 8 * 1024 * 1024)) {
      const buffer = Buffer.allocUnsafe(size)
      const bytesRead = await read(fd, buffer, 0, size, null)
      parts.push(buffer.subarray(0, bytesRead))
      if (bytesRead < size) return parts.length === 1 ? parts[0] : Buffer.concat(parts)
    }
  } finally {
    await close(fd)
  }
}

// The files one read opened, each once, all closed at its end.
class Opened {
  #fds = new Map() // file -> promise of its descriptor

  open (file) {
    if (!this.#fds.has(file)) {
      const fd = open(file, 'r')
      fd.catch(() => {})
      this.#fds.set(file, fd)
    }
    return this.#fds.get(file)
  }

  async close () {
    await Promise.all([...this.#fds.values()].map((fd) => fd.then((n) => close(n), () => {})))
  }
}

module.exports = { DbFiles }

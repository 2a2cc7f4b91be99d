'use strict'

// A LevelDB table file (table/format.cc, table/block.cc), read for the entries of a key
// range: its footer, its index block, and the data blocks the range needs, each checked.
const { crc32c, unmask } = require('./crc32c')
const { unreadable, varint, uint64, DELETION, VALUE } = require('./coding')
const { readAt } = require('./file-io')

const FOOTER = 48
const TRAILER = 5 // a block's type byte and masked CRC-32C
const TAIL = 64 * 1024 // read from a table's end at once: its footer, and its index block most often
const SPAN = 256 * 1024 // the most of a table's consecutive data blocks read at once

// A table file of `size` bytes (the manifest's); its index is read once.
class Table {
  #index // [{ last: the user key every entry of the block is at most, offset, size }]
  #span // { start, buffer }: the bytes last read, kept for the next page; the whole file if no larger than TAIL

  constructor (file, size) {
    this.file = file
    this.size = size
  }

  async cursor (range, opened) {
    const index = this.#index || (this.#index = await this.#readIndex(opened))
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

  // A damaged block handle must not have gigabytes read.
  #within (offset, size) {
    if (offset + size + TRAILER > this.size) throw unreadable(`${this.file}: a block handle past the file's end`)
  }

  // The bytes read last ({ start, buffer }), if they hold the byte at `offset`.
  kept (offset) {
    const span = this.#span
    return span && offset >= span.start && offset < span.start + span.buffer.length ? span : undefined
  }

  async read (start, length, opened) {
    this.#span = { start, buffer: await readAt(await opened.open(this.file), start, length, this.file) }
    return this.#span
  }
}

// Entries in internal key order: fill() before the first peek(), and after a take()
// when wanting() (a promise per entry would cost more than the entry).
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

// The block at buffer[start, start + size), once its trailer says uncompressed and checked.
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

// The first index of a sorted `array` whose element meets `test` (array.length if none).
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

module.exports = { Table, ListCursor }

'use strict'

// A LevelDB manifest read as LevelDB does, from bytes alone: the log guard must know
// which logs LevelDB will replay before it opens the database.
const { varint, lengthPrefixed } = require('./coding')

// A log of VersionEdits; the last numbers set win. { logNumber, prevLogNumber,
// nextFile }, or undefined where LevelDB would not read it.
function parseManifest (buffer) {
  const list = manifestEdits(buffer)
  return list && replay(list).state
}

// The edits in order, each { start (its first byte), logNumber, prevLogNumber, nextFile,
// comparator (where set), added, deleted (table numbers), tables (the added: { level,
// number, size, smallest, largest (internal keys) }) }, or undefined as above.
function manifestEdits (buffer) {
  try {
    return [...records(buffer)].map(({ start, payload }) => decodeEdit(payload, start))
  } catch {
    return undefined
  }
}

// { state (as parseManifest), live (the table numbers `edits` leave) }.
function replay (edits) {
  const state = { logNumber: undefined, prevLogNumber: 0, nextFile: undefined }
  const live = new Set()
  for (const edit of edits) {
    for (const field of Object.keys(state)) if (edit[field] !== undefined) state[field] = edit[field]
    for (const n of edit.deleted) live.delete(n)
    for (const n of edit.added) live.add(n)
  }
  return { state: state.logNumber === undefined || state.nextFile === undefined ? undefined : state, live }
}

// LevelDB's log format: 32 KiB blocks of records, each a 7-byte header (crc32c, length
// LE16, type) and payload; a record split over blocks comes as FIRST, MIDDLE..., LAST.
const BLOCK = 32768
const [FULL, FIRST, MIDDLE, LAST] = [1, 2, 3, 4]

function * records (buffer) {
  let parts
  let start
  for (let block = 0; block < buffer.length; block += BLOCK) {
    const end = Math.min(block + BLOCK, buffer.length)
    for (let pos = block; end - pos >= 7;) { // a shorter block tail is padding
      const length = buffer.readUInt16LE(pos + 4)
      const type = buffer[pos + 6]
      // Zero type: preallocated space, skipped. Past the block: a torn tail, where
      // LevelDB stops too (or damage, which fails its open anyway).
      if (type === 0 || pos + 7 + length > end) break
      const payload = buffer.subarray(pos + 7, pos + 7 + length)
      if (type === FULL) {
        parts = undefined
        yield { start: pos, payload }
      } else if (type === FIRST) {
        parts = [payload]
        start = pos
      } else if (type === MIDDLE && parts) {
        parts.push(payload)
      } else if (type === LAST && parts) {
        yield { start, payload: Buffer.concat([...parts, payload]) }
        parts = undefined
      }
      pos += 7 + length
    }
  }
}

// A VersionEdit (db/version_edit.cc): tagged fields. Those not needed here are skipped,
// by their layout: v a varint, b a length-prefixed string.
const SKIPPED = { 4: 'v', 5: 'vb' } // last sequence, compact pointer

function decodeEdit (buffer, start) {
  const edit = { start, added: [], deleted: [], tables: [] }
  const input = { buffer, pos: 0 }
  while (input.pos < buffer.length) {
    const tag = varint(input)
    if (tag === 1) edit.comparator = bytes(input).toString('latin1')
    else if (tag === 2) edit.logNumber = varint(input)
    else if (tag === 3) edit.nextFile = varint(input)
    else if (tag === 9) edit.prevLogNumber = varint(input)
    else if (tag === 6) edit.deleted.push(fields(input, 'vv')[1]) // level, number
    else if (tag === 7) {
      const [level, number, size, smallest, largest] = fields(input, 'vvvbb')
      edit.added.push(number)
      edit.tables.push({ level, number, size, smallest, largest })
    }
    else if (!SKIPPED[tag]) throw new Error(`unknown VersionEdit tag ${tag}`)
    else fields(input, SKIPPED[tag])
  }
  return edit
}

// The values of fields laid out as `layout` (strings as views of the buffer).
function fields (input, layout) {
  return [...layout].map((field) => (field === 'v' ? varint(input) : bytes(input)))
}

function bytes (input) {
  const [start, end] = lengthPrefixed(input)
  return input.buffer.subarray(start, end)
}

module.exports = { parseManifest, manifestEdits, replay, decodeEdit }

'use strict'

// Reads a LevelDB manifest as LevelDB does, from bytes alone: the log guard must know
// which logs LevelDB will replay before it opens the database.

// The manifest is a LevelDB log of VersionEdits; the last log numbers set win.
// { logNumber, prevLogNumber, nextFile }, or undefined where LevelDB would not read it.
function parseManifest (buffer) {
  const state = { logNumber: undefined, prevLogNumber: 0, nextFile: undefined }
  try {
    for (const record of records(buffer)) applyEdit(record, state)
  } catch {
    return undefined
  }
  return state.logNumber === undefined || state.nextFile === undefined ? undefined : state
}

// LevelDB's log format: 32 KiB blocks of records, each a 7-byte header (crc32c, length
// LE16, type) and payload; a record split over blocks comes as FIRST, MIDDLE..., LAST.
const BLOCK = 32768
const [FULL, FIRST, MIDDLE, LAST] = [1, 2, 3, 4]

function * records (buffer) {
  let parts
  for (let block = 0; block < buffer.length; block += BLOCK) {
    const end = Math.min(block + BLOCK, buffer.length)
    for (let pos = block; end - pos >= 7;) { // a shorter block tail is padding
      const length = buffer.readUInt16LE(pos + 4)
      const type = buffer[pos + 6]
      // Zero type: preallocated space, skipped. Past the block: a torn tail, where
      // LevelDB stops too (or damage, which fails its open anyway).
      if (type === 0 || pos + 7 + length > end) break
      const payload = buffer.subarray(pos + 7, pos + 7 + length)
      pos += 7 + length
      if (type === FULL) {
        parts = undefined
        yield payload
      } else if (type === FIRST) {
        parts = [payload]
      } else if (type === MIDDLE && parts) {
        parts.push(payload)
      } else if (type === LAST && parts) {
        yield Buffer.concat([...parts, payload])
        parts = undefined
      }
    }
  }
}

// A VersionEdit (db/version_edit.cc): tagged fields. Those not needed here are skipped,
// by their layout: v a varint, b a length-prefixed string.
const SKIPPED = { 1: 'b', 4: 'v', 5: 'vb', 6: 'vv', 7: 'vvvbb' } // comparator, last sequence, compact pointer, deleted file, new file

function applyEdit (buffer, state) {
  const input = { buffer, pos: 0 }
  while (input.pos < buffer.length) {
    const tag = varint(input)
    if (tag === 2) state.logNumber = varint(input)
    else if (tag === 3) state.nextFile = varint(input)
    else if (tag === 9) state.prevLogNumber = varint(input)
    else if (!SKIPPED[tag]) throw new Error(`unknown VersionEdit tag ${tag}`)
    else for (const field of SKIPPED[tag]) (field === 'v' ? varint : bytes)(input)
  }
}

// Varint32 or varint64, by arithmetic: exact up to 2^53, which file numbers never reach.
function varint (input) {
  let value = 0
  for (let shift = 0; shift < 64; shift += 7) {
    if (input.pos >= input.buffer.length) throw new Error('truncated varint')
    const byte = input.buffer[input.pos++]
    value += (byte & 0x7f) * 2 ** shift
    if (byte < 0x80) return value
  }
  throw new Error('overlong varint')
}

function bytes (input) {
  const length = varint(input)
  if (input.pos + length > input.buffer.length) throw new Error('truncated field')
  input.pos += length
}

module.exports = { parseManifest }

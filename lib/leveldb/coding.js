'use strict'

// LevelDB's encodings (util/coding.cc); what cannot be decoded rejects as 'unreadable'.

const unreadable = (what) => Object.assign(new Error(what), { reason: 'unreadable' })

// An entry's type, in tables' internal keys and logs' batches.
const [DELETION, VALUE] = [0, 1]

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

// A varint-prefixed string's [start, end) in input.buffer.
function lengthPrefixed (input) {
  const length = varint(input)
  if (input.pos + length > input.buffer.length) throw unreadable('a string runs past its record')
  input.pos += length
  return [input.pos - length, input.pos]
}

module.exports = { unreadable, varint, uint64, lengthPrefixed, DELETION, VALUE }

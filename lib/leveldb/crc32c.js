'use strict'

// CRC-32C (Castagnoli), which LevelDB stores masked in its log records and table blocks
// (util/crc32c.h): Node has none built in. Slicing by 8: eight table lookups per 8 bytes.
const POLY = 0x82f63b78
const TABLES = Array.from({ length: 8 }, () => new Int32Array(256))
for (let n = 0; n < 256; n++) {
  let c = n
  for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ POLY : c >>> 1
  TABLES[0][n] = c
}
for (let n = 0; n < 256; n++) {
  for (let t = 1; t < 8; t++) TABLES[t][n] = (TABLES[t - 1][n] >>> 8) ^ TABLES[0][TABLES[t - 1][n] & 0xff]
}
const [T0, T1, T2, T3, T4, T5, T6, T7] = TABLES

// The CRC-32C of buffer[start, end), unsigned.
function crc32c (buffer, start = 0, end = buffer.length) {
  let crc = -1
  let i = start
  for (; i + 8 <= end; i += 8) {
    const a = crc ^ (buffer[i] | (buffer[i + 1] << 8) | (buffer[i + 2] << 16) | (buffer[i + 3] << 24))
    crc = T7[a & 0xff] ^ T6[(a >>> 8) & 0xff] ^ T5[(a >>> 16) & 0xff] ^ T4[a >>> 24] ^
      T3[buffer[i + 4]] ^ T2[buffer[i + 5]] ^ T1[buffer[i + 6]] ^ T0[buffer[i + 7]]
  }
  for (; i < end; i++) crc = (crc >>> 8) ^ T0[(crc ^ buffer[i]) & 0xff]
  return (crc ^ -1) >>> 0
}

// LevelDB stores a CRC rotated and offset (util/crc32c.h, Mask).
const MASK_DELTA = 0xa282ead8
function unmask (masked) {
  const rot = (masked - MASK_DELTA) >>> 0
  return ((rot >>> 17) | (rot << 15)) >>> 0
}

module.exports = { crc32c, unmask }

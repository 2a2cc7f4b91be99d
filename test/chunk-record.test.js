'use strict'

const { expect } = require('chai')
const chunkRecord = require('../lib/shard/chunk-record')
const { bytes } = require('./helpers')

describe('chunk records (lib/shard/chunk-record.js)', () => {
  const KEY = 'ab'.repeat(20) + ' 0011223344556677 000003'

  function sealed (data) {
    const record = chunkRecord.newRecord(data.length, true)
    expect(chunkRecord.copyIn(record, 0, data)).to.equal(data.length)
    return chunkRecord.seal(KEY, record)
  }

  it('holds the data after the header; a payload and its record are views of each other', () => {
    const data = bytes(1000)
    const record = sealed(data)
    expect(record.length).to.equal(chunkRecord.recordLength(data.length))
    const payload = chunkRecord.payload(record)
    expect(payload.equals(data)).to.equal(true)
    const again = chunkRecord.recordOf(payload)
    expect([again.buffer, again.byteOffset, again.length]).to.deep.equal([record.buffer, record.byteOffset, record.length])
  })

  it('is intact as sealed, also as the plain Uint8Array the digest thread receives', () => {
    const record = sealed(bytes(1000))
    expect(chunkRecord.intact(KEY, record)).to.equal(true)
    const received = new Uint8Array(record) // a copy, as posted to a worker
    expect(Buffer.isBuffer(received)).to.equal(false)
    expect(chunkRecord.intact(KEY, received)).to.equal(true)
    received[500] ^= 1
    expect(chunkRecord.intact(KEY, received)).to.equal(false)
  })

  it('is not intact with a bit flipped in its data or header, under another key, or shorter than a header', () => {
    const record = sealed(bytes(1000))
    for (const at of [0, 3, 4, 999 + chunkRecord.HEADER]) {
      const damaged = Buffer.from(record)
      damaged[at] ^= 0x80
      expect(chunkRecord.intact(KEY, damaged), `byte ${at}`).to.equal(false)
    }
    expect(chunkRecord.intact(KEY.replace(/3$/, '4'), record)).to.equal(false)
    expect(chunkRecord.intact(KEY, record.subarray(0, chunkRecord.HEADER - 1))).to.equal(false)
    expect(chunkRecord.intact(KEY, chunkRecord.seal(KEY, chunkRecord.newRecord(0, false)))).to.equal(true)
  })

  it('has a header only for versions whose metadata names a chunk digest (format 2)', () => {
    expect(chunkRecord.headerOf({ chunkDigest: chunkRecord.CHUNK_DIGEST })).to.equal(chunkRecord.HEADER)
    expect(chunkRecord.headerOf({})).to.equal(0)
  })
})

'use strict'

const { expect } = require('chai')
const crypto = require('node:crypto')
const { coerceKey, MAX_NAME_BYTES } = require('../lib/api/keys')
const { throws } = require('./helpers')

describe('keys', () => {
  it('uses 40 and 64 hex-character keys as they are, lower-cased', () => {
    const k40 = 'AB'.repeat(20)
    const k64 = 'Cd'.repeat(32)
    expect(coerceKey(k40)).to.deep.equal({ key: 'ab'.repeat(20), name: undefined })
    expect(coerceKey(k64)).to.deep.equal({ key: 'cd'.repeat(32), name: undefined })
  })

  it('hashes any other string with RIPEMD-160 and keeps it as the name', () => {
    // RIPEMD-160("abc") from the algorithm's published test vectors
    expect(coerceKey('abc')).to.deep.equal({ key: '8eb208f7e05d987a9b044a8e98c6b087f15a0bfc', name: 'abc' })
    // hex of other lengths, or with non-hex characters, is a name too
    for (const name of ['ab'.repeat(19), 'ab'.repeat(21), 'g'.repeat(40), ' ' + 'a'.repeat(40)]) {
      expect(coerceKey(name).name).to.equal(name)
      expect(coerceKey(name).key).to.equal(crypto.createHash('ripemd160').update(name).digest('hex'))
    }
  })

  it('rejects empty strings, non-strings and over-long names with EINVAL', () => {
    for (const bad of ['', null, undefined, 42, {}, Buffer.from('ab'), ['a']]) throws(() => coerceKey(bad), 'EINVAL')
    throws(() => coerceKey('x'.repeat(MAX_NAME_BYTES + 1)), 'EINVAL')
    expect(coerceKey('x'.repeat(MAX_NAME_BYTES)).name).to.have.length(MAX_NAME_BYTES)
  })

  it('rejects a name with a lone surrogate, which UTF-8 would store as U+FFFD, naming where it is', () => {
    for (const [bad, at] of [['\ud800x', 0], ['x\udc00', 1], ['ab\udbff\ud800', 2], ['\ud83d\ude00\ude00', 2]]) {
      const err = throws(() => coerceKey(bad), 'EINVAL')
      expect(err.argument).to.equal('key')
      expect(err.message).to.contain('lone surrogate').and.contain(`at index ${at}`)
    }
    // '\ufffdx' stays a name of its own; a well-formed pair is a name like any other.
    expect(coerceKey('\ufffdx').name).to.equal('\ufffdx')
    expect(coerceKey('\ud83d\ude00').name).to.equal('\ud83d\ude00')
  })
})

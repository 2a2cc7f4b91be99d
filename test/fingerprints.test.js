'use strict'

const { expect } = require('chai')
const { Fingerprints } = require('../lib/shard/fingerprints')
const { sha256 } = require('./helpers')

const keys = (n, seed = 'key') => Array.from({ length: n }, (_, i) => sha256(`${seed} ${i}`))
// A key whose fingerprint (its first 7 hex digits) is another's.
const twinOf = (key) => key.slice(0, 7) + [...key.slice(7)].map((c) => (c === 'f' ? '0' : 'f')).join('')

describe('fingerprints: the keys a shard may hold', () => {
  it('answers as the keys held: never lacks one held, lacks one absent', () => {
    const prints = new Fingerprints()
    prints.made()
    const held = new Map() // fingerprint digits -> keys holding them
    const all = keys(3000)
    all.forEach((key, i) => {
      prints.added(key, i + 1)
      held.set(key.slice(0, 7), (held.get(key.slice(0, 7)) || 0) + 1)
    })
    const twin = twinOf(all[7])
    prints.added(twin, all.length + 1)
    for (let i = 0; i < all.length; i += 2) prints.removed(all[i], all.length - i / 2)
    for (let i = 0; i < all.length; i++) {
      // A removed key may share its fingerprint with one still held: then it is not lacked.
      const stillHeld = i % 2 === 1 || all.some((k, j) => j % 2 === 1 && k.slice(0, 7) === all[i].slice(0, 7))
      expect(prints.lacks(all[i]), `key ${i}`).to.equal(!stillHeld)
    }
    // The twin of a removed key is still held, and keeps the fingerprint.
    expect(prints.lacks(twin)).to.equal(false)
    expect(prints.lacks(all[7])).to.equal(false)
    prints.removed(twin, 1)
    expect(prints.lacks(all[6])).to.equal(true)
    for (const key of keys(500, 'other')) {
      if (!held.has(key.slice(0, 7))) expect(prints.lacks(key)).to.equal(true)
    }
  })

  it('made from the keys a shard holds, twins counted', async () => {
    const prints = new Fingerprints()
    const stored = [...keys(100), twinOf(keys(1)[0])]
    expect(await prints.mayHold(keys(1)[0], stored.length, async function * () { yield * stored })).to.equal(true)
    expect(prints.lacks(sha256('absent'))).to.equal(!stored.some((k) => k.slice(0, 7) === sha256('absent').slice(0, 7)))
    prints.removed(keys(1)[0], stored.length - 1)
    expect(prints.lacks(keys(1)[0])).to.equal(false) // its twin holds the fingerprint
  })

  it('keys that cannot be read: none are kept, every key may be held', async () => {
    const prints = new Fingerprints()
    const failing = async function * () {
      yield keys(1)[0]
      throw new Error('a damaged record')
    }
    expect(await prints.mayHold(sha256('absent'), 2, failing)).to.equal(true)
    expect(prints.lacks(sha256('absent'))).to.equal(false)
  })
})

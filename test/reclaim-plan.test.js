'use strict'

const { expect } = require('chai')
const { planReclaim } = require('../lib/shard/reclaim-plan')
const { ChunkKeys } = require('../lib/shard/records')

const MiB = 1024 * 1024
const covers = (piece, key) => piece.from <= key && key <= piece.to
const note = (key, version, bytes) => ({ id: `!x!${key} ${version}`, prefix: `${key} ${version}`, bytes })

describe('the reclaim plan', () => {
  it('covers a removed version\'s file key, where its head held its data, however large the version', () => {
    const key = 'a'.repeat(40)
    for (const chunkSize of [128 * 1024, 64 * MiB]) {
      const keys = new ChunkKeys(32 * 1024 * MiB, chunkSize)
      const pieces = planReclaim([note(key, '1'.repeat(16), 40 * MiB)], keys, 1024 * MiB)
      expect(pieces.some((p) => covers(p, key)), `chunkSize ${chunkSize}`).to.equal(true)
      expect(pieces.some((p) => covers(p, keys.key(key, '1'.repeat(16), 0)))).to.equal(true)
    }
  })

  it('never covers a key twice: a second removed version of a key starts after the first', () => {
    const key = 'b'.repeat(40)
    const keys = new ChunkKeys(32 * 1024 * MiB, 128 * 1024)
    const dead = [note(key, '1'.repeat(16), 20 * MiB), note(key, '2'.repeat(16), 20 * MiB), note('c'.repeat(40), '3'.repeat(16), 40 * MiB)]
    const pieces = planReclaim(dead, keys, 1024 * MiB)
    for (let i = 1; i < pieces.length; i++) expect(pieces[i].from > pieces[i - 1].to, JSON.stringify(pieces)).to.equal(true)
    expect(pieces.filter((p) => covers(p, key))).to.have.length(1)
    expect(pieces.some((p) => covers(p, 'c'.repeat(40)))).to.equal(true)
  })
})

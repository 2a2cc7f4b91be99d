'use strict'

const { expect } = require('chai')
const { BatchSender } = require('../lib/data/batch-sender')

// A writer as BatchSender uses it, whose shard makes each batch wait for room until let go.
function fakeWriter () {
  const writer = {
    key: 'k',
    version: 'v',
    sync: false,
    chunkSize: 4,
    aborting: false,
    sent: [],
    given: [],
    rooms: [],
    ticket: { hold () {}, unhold () {}, give () {} },
    records: { give: (chunks) => writer.given.push(...chunks) },
    mayWrite () {},
    sendHeld () {},
    shard: {
      room: () => new Promise((resolve) => writer.rooms.push(resolve)),
      writeChunks: (key, version, first, chunks) => {
        writer.sent.push(...chunks)
        return Promise.resolve()
      }
    }
  }
  return writer
}

describe('a writer\'s chunks sent to LevelDB (lib/data/batch-sender.js)', () => {
  it('a write aborted while its batches wait for the memory budget sends none of the rest and gives every record back', async () => {
    const writer = fakeWriter()
    const sender = new BatchSender(writer)
    const chunks = [Buffer.alloc(8, 1), Buffer.alloc(8, 2), Buffer.alloc(8, 3)]
    for (const chunk of chunks) sender.addLast(chunk)
    const flushing = sender.flush().then(() => undefined, (err) => err)
    await new Promise((resolve) => setImmediate(resolve))
    writer.rooms.shift()() // room for the first batch
    await new Promise((resolve) => setImmediate(resolve))
    writer.aborting = true
    writer.rooms.shift()() // the second batch's wait ends on an aborting write
    const err = await flushing
    expect(err && err.code).to.equal('ECANCELED')
    expect(writer.sent).to.deep.equal([chunks[0]])
    expect(writer.given).to.have.members(chunks) // the one sent, and the two never sent
  })
})

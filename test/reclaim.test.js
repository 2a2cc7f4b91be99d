'use strict'

const { execFileSync } = require('node:child_process')
const path = require('node:path')
const { expect } = require('chai')
const { diskUsage } = require('../lib/dir/disk-usage')
const { useTmp, keyInShard, bytes, sha256, collect, REF, scaled, sleep } = require('./helpers')
const { Shard } = require('../lib/shard/shard')
const { ChunkKeys, WHOLE } = require('../lib/shard/records')
const { Reclaimer } = require('../lib/maintenance/reclaimer')

const MiB = 1024 * 1024
const FILES = 6
const SIZE = 4 * MiB

// Polls until the store's directory holds at most `bytes`, or the time is up.
async function usageFallsTo (dir, bytes, ms = 15000) {
  const until = Date.now() + scaled(ms)
  let used = await diskUsage(dir)
  while (used > bytes && Date.now() < until) {
    await new Promise((resolve) => setTimeout(resolve, 200))
    used = await diskUsage(dir)
  }
  return used
}

describe('space comes back by itself', function () {
  this.timeout(scaled(60000))
  const t = useTmp()
  const keys = Array.from({ length: FILES }, (_, i) => keyInShard(REF, 5 + i, `dead ${i}`)) // one file per shard, as a store in use sees

  async function writeAndRemove (store) {
    for (const [i, key] of keys.entries()) {
      await store.writeFile(key, bytes(SIZE, key))
      if (i % 2 === 0) await store.unlink(key)
      else await store.writeFile(key, bytes(SIZE / 4, key)) // overwritten by a smaller version
    }
  }

  it('the space of unlinked and overwritten files is reclaimed in the background, without compact()', async () => {
    const store = t.open({ referenceId: REF })
    const started = Date.now()
    await writeAndRemove(store)
    const live = (FILES / 2) * (SIZE / 4)
    // Nothing was dropped yet, unless the writes outlasted the idle delay (2 s) and
    // reclaiming began among them, as on a busy machine.
    if (Date.now() - started < 2000) expect(await diskUsage(store.location)).to.be.above(FILES * SIZE * 0.9)
    expect(await usageFallsTo(store.location, live + 2 * MiB)).to.be.at.most(live + 2 * MiB)
    for (const [i, key] of keys.entries()) {
      if (i % 2 === 0) expect(await store.exists(key)).to.equal(false)
      else expect((await store.readFile(key)).equals(bytes(SIZE / 4, key))).to.equal(true)
    }
    expect((await store.verify()).problems).to.deep.equal([])
  })

  it('every removed byte comes back, whatever the file\'s size: 400 files of 62,068 bytes removed leave under 10% of them', async () => {
    const store = t.open({ referenceId: REF, shardCount: 4 })
    const pieces = Array.from({ length: 400 }, (_, i) => sha256(`piece ${i}`))
    for (const key of pieces) await store.writeFile(key, bytes(62068, key))
    const live = 400 * 62068
    await store.close()
    const again = t.open({ referenceId: REF })
    for (const key of pieces) await again.unlink(key)
    expect(await usageFallsTo(again.location, live / 10)).to.be.at.most(live / 10)
  })

  // 300 pieces of 62,068 bytes written and removed in a store of 16 shards, before any
  // shard's memtable was flushed: each shard's writes and deletes then lie in one table
  // once flushed, which compacting the removed versions' ranges alone left whole (all
  // of it stayed, after reclaim() and after close()). Returns the pieces' bytes.
  const PIECES = 300
  async function piecesWrittenAndRemoved (store) {
    const pieces = Array.from({ length: PIECES }, (_, i) => sha256(`small ${i}`))
    for (const key of pieces) await store.writeFile(key, bytes(62068, key))
    for (const key of pieces) await store.unlink(key)
    return PIECES * 62068
  }

  it('reclaim() gives back the space of small files written and removed before any flush, all of it', async () => {
    const store = t.open({ referenceId: REF, shardCount: 16, reclaim: false })
    const removed = await piecesWrittenAndRemoved(store)
    expect(await diskUsage(store.location)).to.be.above(removed * 0.9)
    await store.reclaim()
    expect(await diskUsage(store.location)).to.be.at.most(removed / 20)
    await store.close()
    expect(await diskUsage(store.location)).to.be.at.most(removed / 20)
    expect(await collect(t.open({ referenceId: REF }).list())).to.deep.equal([])
  })

  it('a store that goes idle after such removals gives their space back by itself', async () => {
    const store = t.open({ referenceId: REF, shardCount: 16 })
    const removed = await piecesWrittenAndRemoved(store)
    expect(await usageFallsTo(store.location, removed / 20)).to.be.at.most(removed / 20)
  })

  it('reclaim: false leaves the space to compact()', async () => {
    const store = t.open({ referenceId: REF, reclaim: false })
    await writeAndRemove(store)
    await sleep(3000) // past the idle delay (2 s), and a reclaim would be under way
    expect(await diskUsage(store.location)).to.be.above(FILES * SIZE * 0.9)
    await store.compact()
    expect(await diskUsage(store.location)).to.be.below(FILES * SIZE * 0.3)
  })

  it('reclaim() gives the space back before it resolves, even with reclaim: false', async () => {
    const store = t.open({ referenceId: REF, reclaim: false })
    await writeAndRemove(store)
    expect(await diskUsage(store.location)).to.be.above(FILES * SIZE * 0.9)
    await store.reclaim()
    const live = (FILES / 2) * (SIZE / 4)
    expect(await diskUsage(store.location)).to.be.at.most(live + 2 * MiB)
    await store.reclaim() // nothing left: resolves at once
    for (const [i, key] of keys.entries()) {
      if (i % 2 === 0) expect(await store.exists(key)).to.equal(false)
      else expect((await store.readFile(key)).equals(bytes(SIZE / 4, key))).to.equal(true)
    }
  })

  it('reclaim() called just before close() resolves: it stops at its next piece, without ECLOSED', async () => {
    const store = t.open({ referenceId: REF, reclaim: false })
    await writeAndRemove(store)
    const reclaimed = store.reclaim()
    const closed = store.close()
    await reclaimed
    await closed
  })

  it('removals noted before a crash are reclaimed once the shard is used again, losing nothing', async () => {
    const dir = path.join(t.dir, 'store')
    execFileSync(process.execPath, ['-e', `
      // reclaim: false, so that nothing is reclaimed before the exit however slow the
      // writes (a busy machine let the idle delay pass during them)
      const store = require(${JSON.stringify(path.resolve(__dirname, '..'))})(process.argv[1], { referenceId: '${REF}', reclaim: false })
      const { bytes } = require(${JSON.stringify(path.join(__dirname, 'helpers'))})
      const keys = ${JSON.stringify(keys)}
      ;(async () => {
        for (const [i, key] of keys.entries()) {
          await store.writeFile(key, bytes(${SIZE}, key))
          if (i % 2 === 0) await store.unlink(key)
        }
        process.exit(0) // as a crash: no close()
      })()`, dir])
    expect(await diskUsage(dir)).to.be.above(FILES * SIZE * 0.9)
    const store = t.open({ referenceId: REF })
    for (const [i, key] of keys.entries()) expect(await store.exists(key)).to.equal(i % 2 === 1) // opens their shards
    const live = (FILES / 2) * SIZE
    expect(await usageFallsTo(dir, live + 2 * MiB)).to.be.at.most(live + 2 * MiB)
    for (const [i, key] of keys.entries()) {
      if (i % 2 === 1) expect((await store.readFile(key)).equals(bytes(SIZE, key))).to.equal(true)
    }
    expect((await store.verify()).problems).to.deep.equal([])
  })

  it('close() during reclaiming waits for it, and the process exits by itself', async () => {
    const dir = path.join(t.dir, 'store')
    const started = Date.now()
    execFileSync(process.execPath, ['-e', `
      const store = require(${JSON.stringify(path.resolve(__dirname, '..'))})(process.argv[1], { referenceId: '${REF}' })
      const { bytes } = require(${JSON.stringify(path.join(__dirname, 'helpers'))})
      const keys = ${JSON.stringify(keys)}
      ;(async () => {
        for (const key of keys) await store.writeFile(key, bytes(${SIZE}, key))
        for (const key of keys) await store.unlink(key)
        setTimeout(() => store.close(), 2050) // about when the idle reclaim starts
      })()`, dir], { timeout: scaled(30000) })
    expect(Date.now() - started).to.be.below(scaled(30000))
    const store = t.open({ referenceId: REF })
    for (const key of keys) expect(await store.exists(key)).to.equal(false)
    expect((await store.verify()).problems).to.deep.equal([])
  })

  it('reclaiming comes in pieces of at most 32 MiB of removed data, which together cover every removed chunk', async () => {
    const C = 128 * 1024
    const store = t.open({ referenceId: REF, reclaim: false })
    const files = [['big', 80 * MiB], ['small a', 200 * 1024], ['small b', 300 * 1024]].map(([name, size]) => ({ key: keyInShard(REF, 3, name), size }))
    for (const { key, size } of files) await store.writeFile(key, bytes(size, key))
    for (const { key } of files) await store.unlink(key)
    await store.close()
    const shard = await Shard.open({ index: 3, location: path.join(store.location, '003.s'), cap: 1e12, chunkKeys: new ChunkKeys(1e12, C), sync: false })
    try {
      const plan = await shard.reclaimPlan()
      expect(plan.bytes).to.equal(files.reduce((sum, f) => sum + f.size, 0))
      expect(plan.ids).to.have.length(3)
      const versions = new Map(plan.ids.map((id) => id.slice('!x!'.length).split(' ')))
      const chunkKeys = files.flatMap(({ key, size }) => Array.from({ length: Math.ceil(size / C) }, (_, n) => shard.chunkKeys.key(key, versions.get(key), n)))
      const covering = (k) => plan.pieces.filter(({ from, to }) => from <= k && k <= to)
      for (const k of chunkKeys) expect(covering(k), k).to.have.length(1)
      // LevelDB's own compactions (the close's flush may start one) may have brought the
      // shard to 32 MiB or less: it is then one piece, the whole shard, no larger.
      const [first] = plan.pieces
      if (plan.pieces.length === 1 && first.from === WHOLE.from && first.to === WHOLE.to) {
        expect(first.tables).to.be.at.most(32 * MiB)
      } else {
        for (const piece of plan.pieces) expect(chunkKeys.filter((k) => piece.from <= k && k <= piece.to).length).to.be.at.most(32 * MiB / C)
        expect(plan.pieces).to.have.length.within(3, 5) // the big file in 3, the small ones alone or together
      }
      // Whatever LevelDB's own compactions reclaimed already, what is left must go.
      for (const piece of plan.pieces) await shard.compactPiece(piece)
      await shard.forgetDead(plan)
      expect(await diskUsage(shard.location)).to.be.below(8 * MiB)
      expect(shard.dead).to.equal(0)
      expect((await shard.reclaimPlan()).pieces).to.deep.equal([])
    } finally {
      await shard.close()
    }
  })

  it('a piece the disk has no room for is not compacted: its notes stay, and reclaim() fails with ENOSPC', async () => {
    const calls = []
    const shard = {
      index: 7,
      name: '007',
      reclaimable: 3,
      reclaimPlan: async () => ({ pieces: [1, 2], ids: ['x'], bytes: 3 }),
      compactPiece: async (piece) => calls.push(`compact ${piece}`),
      forgetDead: async () => calls.push('forget')
    }
    let room = false
    const reclaimer = new Reclaimer({
      openShards: () => [shard],
      inShard: (index, fn) => fn(shard),
      room: async (piece) => {
        calls.push(`room ${piece}`)
        return room
      },
      idleMs: 0
    })
    const err = await reclaimer.reclaimNow().then(() => undefined, (e) => e)
    expect(err.code).to.equal('ENOSPC')
    expect(err.disk).to.equal(true)
    expect(err.shard).to.equal(7)
    expect(calls).to.deep.equal(['room 1'])
    room = true
    calls.length = 0
    shard.forgetDead = async () => {
      calls.push('forget')
      shard.reclaimable = 0
    }
    await reclaimer.reclaimNow()
    expect(calls).to.deep.equal(['room 1', 'compact 1', 'room 2', 'compact 2', 'forget'])
    await reclaimer.stop()
  })

  it('writes go first: a piece waits for writes in progress, but not for long ones', async () => {
    // Driven by its own clock and by `writing`, never by real-time windows: what is
    // asserted is the order of pieces and writes.
    const compacted = []
    let writing = 0 // as the store's writing(): 0, or the same number while writes go on
    let polls = 0
    let clock = 0
    const shard = {
      index: 7,
      reclaimable: 3,
      reclaimPlan: async () => ({ pieces: [1, 2, 3], ids: ['x'], bytes: 3 }),
      compactPiece: async (piece) => compacted.push({ piece, writing, clock }),
      forgetDead: async () => { shard.reclaimable = 0 }
    }
    const YIELD = 100
    const reclaimer = new Reclaimer({
      openShards: () => [shard],
      inShard: (index, fn) => fn(shard),
      writing: () => { polls++; return writing },
      idleMs: 0,
      yieldMs: YIELD,
      now: () => clock
    })
    const until = async (condition, what) => {
      const deadline = Date.now() + scaled(10000)
      while (!condition() && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 5))
      expect(condition(), what).to.equal(true)
    }
    // Starts reclaiming the three pieces again; resolves once it asked about writes a few
    // times, or compacted a piece without waiting (which the caller's assertion catches).
    const start = async () => {
      shard.reclaimable = 3
      const from = { polls, compacted: compacted.length }
      reclaimer.noteDead()
      await until(() => polls >= from.polls + 3 || compacted.length > from.compacted, 'the reclaimer asked about writes')
    }
    const pieces = (from) => compacted.slice(from).map(({ piece }) => piece)
    try {
      await steps()
    } finally {
      await reclaimer.stop()
    }

    async function steps () {
      // A write in progress: nothing is compacted while the window lasts; then it ends.
      writing = 1
      await start()
      expect(compacted).to.deep.equal([])
      writing = 0
      await until(() => compacted.length === 3, 'the pieces once the write ended')
      expect(compacted.map((c) => c.writing)).to.deep.equal([0, 0, 0])
      expect(pieces(0)).to.deep.equal([1, 2, 3])

      // A long write: the pieces wait for it until the window is over, then go on beside it.
      writing = 2
      await start()
      expect(compacted).to.have.length(3)
      clock += YIELD
      await until(() => compacted.length === 6, 'the pieces once the write outlasted the window')
      expect(compacted.slice(3).map((c) => c.writing)).to.deep.equal([2, 2, 2])

      // The same writes still going on: not waited for again, though the clock stands still.
      shard.reclaimable = 3
      reclaimer.noteDead()
      await until(() => compacted.length === 9, 'the pieces beside the same long write')
      expect(compacted.slice(6).map((c) => c.clock)).to.deep.equal([clock, clock, clock])

      // Other writes: waited for again.
      writing = 3
      await start()
      expect(compacted).to.have.length(9)
      clock += YIELD
      await until(() => compacted.length === 12, 'the pieces once the other write outlasted the window')
      expect(pieces(9)).to.deep.equal([1, 2, 3])
    }
  })
})

// The Reclaimer and compact() both forget dead notes, on one shard at once: a store
// holds a shard for each without excluding the other. `dead` must stay the sum of the
// notes left, or removals still noted are never reclaimed (issue 18, item 7).
describe('when reclaiming runs', function () {
  this.timeout(scaled(30000))
  const MiB = 1024 * 1024

  // A fake shard whose plan reclaims `step` bytes at a time.
  function fakeShard (reclaimable, step) {
    const shard = {
      index: 1,
      name: '001',
      reclaimable,
      compacted: 0,
      reclaimPlan: async () => ({ pieces: [1], ids: ['x'], bytes: Math.min(step, shard.reclaimable) }),
      compactPiece: async () => { shard.compacted++ },
      forgetDead: async () => { shard.reclaimable = Math.max(0, shard.reclaimable - step) }
    }
    return shard
  }

  it('removals alone wait for a pause, however much they leave dead: they take no more disk', async () => {
    const shard = fakeShard(300 * MiB, 120 * MiB)
    // A pause is idleMs without a removal: far longer than the 20 ms between these, even
    // on a loaded machine.
    const reclaimer = new Reclaimer({ openShards: () => [shard], inShard: (index, fn) => fn(shard), idleMs: scaled(1000) })
    for (let i = 0; i < 5; i++) {
      reclaimer.noteDead()
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
    expect(shard.compacted).to.equal(0)
    const until = Date.now() + scaled(10000)
    while (shard.reclaimable > 0 && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 10))
    await reclaimer.stop()
    expect(shard.reclaimable).to.equal(0)
  })

  it('past 256 MiB a write starts it at once, and what is left once removals pause is reclaimed too', async () => {
    const shard = fakeShard(300 * MiB, 120 * MiB) // at once: 300, 180, then 60 is under 64 MiB
    const reclaimer = new Reclaimer({ openShards: () => [shard], inShard: (index, fn) => fn(shard), idleMs: 50 })
    reclaimer.noteDead() // the last removal
    reclaimer.noteWrite() // a write begins, with more than 256 MiB dead
    expect(shard.compacted).to.equal(0)
    await new Promise((resolve) => setImmediate(resolve))
    expect(shard.compacted).to.be.above(0) // before the pause's timer
    const until = Date.now() + scaled(10000)
    while (shard.reclaimable > 0 && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 10))
    await reclaimer.stop()
    expect(shard.reclaimable).to.equal(0)
  })

  it('a pause in removals while a run is in progress is not lost: another run follows', async () => {
    const shard = fakeShard(300 * MiB, 120 * MiB)
    let release
    const gate = new Promise((resolve) => { release = resolve })
    const compactPiece = shard.compactPiece
    shard.compactPiece = async () => { await gate; return compactPiece() }
    const reclaimer = new Reclaimer({ openShards: () => [shard], inShard: (index, fn) => fn(shard), idleMs: 10 })
    reclaimer.noteDead()
    reclaimer.noteWrite() // reclaiming at once, down to 64 MiB, held at its first piece
    await sleep(50) // the pause's timer (10 ms) fired meanwhile
    release()
    const until = Date.now() + scaled(10000)
    while (shard.reclaimable > 0 && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 10))
    await reclaimer.stop()
    expect(shard.reclaimable).to.equal(0)
  })
})

describe('a range is compacted once removed versions are a quarter of its tables', function () {
  this.timeout(scaled(30000))
  const t = useTmp()
  const SIZE = 62068

  // fn(shard, keys) on shard 3 of a closed store holding 20 files there (in table files
  // now), opened alone, with the first and the last removed: one range spanning all 20
  // files, a tenth of it removed.
  async function withTwentyFiles (name, fn) {
    const store = t.open({ referenceId: REF, reclaim: false })
    const keys = Array.from({ length: 20 }, (_, i) => keyInShard(REF, 3, `${name} ${i}`)).sort()
    for (const key of keys) await store.writeFile(key, bytes(SIZE, key))
    await store.close()
    const shard = await Shard.open({ index: 3, location: path.join(store.location, '003.s'), cap: 1e12, chunkKeys: new ChunkKeys(1e12, 128 * 1024), sync: false })
    try {
      await shard.unlink(keys[0])
      await shard.unlink(keys[19])
      await fn(shard, keys)
    } finally {
      await shard.close()
    }
  }

  it('two files removed among 20 wait; six are compacted; the notes of what waits stay', () => withTwentyFiles('share', async (shard, keys) => {
    const waiting = await shard.reclaimPlan()
    expect(waiting.pieces).to.deep.equal([])
    expect(waiting.ids).to.deep.equal([])
    expect(shard.dead).to.equal(2 * SIZE)
    expect(shard.reclaimable).to.equal(0)
    for (const key of keys.slice(5, 9)) await shard.unlink(key) // 6 of 20: 30%
    expect(shard.reclaimable, 'the new removals only').to.equal(4 * SIZE)
    const plan = await shard.reclaimPlan()
    expect(plan.pieces).to.have.length(1)
    expect(plan.ids).to.have.length(6)
    for (const piece of plan.pieces) await shard.compactPiece(piece)
    await shard.forgetDead(plan)
    expect(shard.dead).to.equal(0)
    expect(shard.reclaimable).to.equal(0)
  }))

  it('a plan that scanned before compact() forgot the notes defers nothing: a removal since stays reclaimable', () => withTwentyFiles('stale', async (shard, keys) => {
    const approximateSize = shard.db.approximateSize
    let once = true
    shard.db.approximateSize = async function (...args) {
      if (once) { // after the plan's scan: compact() forgets its notes, then a removal
        once = false
        await shard.compact()
        await shard.unlink(keys[10])
      }
      return approximateSize.apply(this, args)
    }
    await shard.reclaimPlan()
    expect(shard.dead).to.equal(SIZE)
    expect(shard.reclaimable, 'the removal after compact()').to.equal(SIZE)
  }))

  it('a removal while compact() runs stays reclaimable, even after a plan left notes for later', () => withTwentyFiles('compact', async (shard, keys) => {
    expect((await shard.reclaimPlan()).ids).to.deep.equal([]) // both left for later
    expect(shard.deferred).to.equal(2 * SIZE)
    const compactRange = shard.db.compactRange
    shard.db.compactRange = async function (...args) {
      const done = compactRange.apply(this, args)
      await shard.unlink(keys[10]) // noted while compact() compacts
      return done
    }
    await shard.compact()
    expect(shard.dead).to.equal(SIZE)
    expect(shard.reclaimable, 'the removal during compact()').to.equal(SIZE)
  }))
})

describe('dead bytes stay the sum of the notes left', function () {
  this.timeout(scaled(30000))
  const t = useTmp()
  const SIZE = 256 * 1024
  const names = ['a', 'b', 'c']
  let shard, keys

  beforeEach(async () => {
    const store = t.open({ referenceId: REF, reclaim: false })
    keys = names.map((name) => keyInShard(REF, 3, `dead ${name}`))
    for (const key of keys) await store.writeFile(key, bytes(SIZE, key))
    await store.unlink(keys[0]) // a, noted as dead; b and c are removed by the tests
    await store.close()
    shard = await Shard.open({ index: 3, location: path.join(store.location, '003.s'), cap: 1e12, chunkKeys: new ChunkKeys(1e12, 128 * 1024), sync: false })
    expect(shard.dead).to.equal(SIZE)
  })

  afterEach(async () => {
    await shard.close()
  })

  const noted = async () => (await shard.reclaimPlan()).bytes

  it('a plan whose notes compact() forgot first does not take a later removal\'s bytes with it', async () => {
    const plan = await shard.reclaimPlan() // a
    await shard.compact() // forgets a
    await shard.unlink(keys[1]) // b, noted meanwhile
    await shard.forgetDead(plan)
    expect(await noted()).to.equal(SIZE)
    expect(shard.dead).to.equal(SIZE)
  })

  it('an empty plan does not forget a removal noted after it was made', async () => {
    await shard.compact()
    const plan = await shard.reclaimPlan() // nothing
    expect(plan.ids).to.deep.equal([])
    await shard.unlink(keys[1])
    await shard.forgetDead(plan)
    expect(shard.dead).to.equal(SIZE)
  })

  it('compact() does not forget bytes a plan forgot while it compacted', async () => {
    const plan = await shard.reclaimPlan() // a
    const compactRange = shard.db.compactRange.bind(shard.db)
    shard.db.compactRange = async (...range) => {
      // The Reclaimer finishes its plan and b is removed, while compact() compacts.
      await shard.forgetDead(plan)
      await shard.unlink(keys[1])
      return compactRange(...range)
    }
    await shard.compact()
    expect(await noted()).to.equal(SIZE)
    expect(shard.dead).to.equal(SIZE)
  })
})

'use strict'

// Repair is exclusive and crash-safe (issue "Correct under every fault", item 4).
const { expect } = require('chai')
const fs = require('node:fs')
const path = require('node:path')
const { spawn } = require('node:child_process')
const { LevelDb } = require('../lib/leveldb/leveldb')
const { useTmp, rejects, bytes, collect, keyInShard, assertNoStrayChunks, toFormat2, REF, scaled, sleep } = require('./helpers')

const C = 1024
const ROOT = path.join(__dirname, '..')

describe('repair', () => {
  const t = useTmp()

  it('holds the shard against an operation that was already waiting for a slot', async () => {
    const store = t.open({ referenceId: REF, chunkSize: C, maxOpenShards: 1, shardWaitTimeout: 20000 })
    const a = keyInShard(REF, 1, 'a')
    const b = keyInShard(REF, 2, 'b')
    await store.writeFile(a, bytes(64 * C))
    await store.writeFile(b, bytes(8 * C))
    const rs = store.createReadStream(a) // holds the only slot
    await new Promise((resolve) => rs.once('readable', resolve))
    const waiting = store.readFile(b) // waits for the slot
    const outcome = waiting.then(() => 'read', (err) => err.code)
    await sleep(50) // it waits for the slot now
    const repairing = store.repair(2)
    rs.destroy() // frees the slot while repair works on shard 2
    const result = await repairing
    expect(result).to.include({ shard: 2, files: 1 })
    expect(await outcome).to.equal('EBUSY')
    expect((await store.readFile(b)).equals(bytes(8 * C))).to.equal(true)
  })

  it('a crash during repair leaves a mark: the shard is ECORRUPT until repaired again, which finishes the job', async function () {
    this.timeout(scaled(30000))
    const dir = path.join(t.dir, 'store')
    const keys = [0, 1, 2].map((i) => keyInShard(REF, 5, `k${i}`))
    const store = t.open({ referenceId: REF, chunkSize: C })
    for (const key of keys) await store.writeFile(key, bytes(4 * C, key))
    await store.close()
    // Damage one file (a chunk goes), so repair drops it.
    const db = await LevelDb.open(path.join(dir, '005.s'))
    await db.clear({ gt: `${keys[1]} `, lt: `${keys[1]} ~`, limit: 1 })
    await db.close()

    // A process repairs the shard and is killed right after it dropped the damaged
    // file's metadata, before its chunks and the accounting were rewritten.
    const script = `
      const { LevelDb } = require('./lib/leveldb/leveldb')
      const batch = LevelDb.prototype.batch
      let dropped = false
      LevelDb.prototype.batch = async function (ops, options) {
        if (dropped) process.kill(process.pid, 'SIGKILL')
        const result = await batch.call(this, ops, options)
        if (ops.some((op) => op.type === 'del' && op.key.startsWith('!m!'))) dropped = true
        return result
      }
      require('./')(process.argv[1]).repair(5).then(() => process.exit(3))`
    const signal = await new Promise((resolve) => {
      spawn(process.execPath, ['-e', script, dir], { cwd: ROOT, stdio: 'inherit' }).on('exit', (code, sig) => resolve(sig || code))
    })
    expect(signal).to.equal('SIGKILL')

    const again = t.open()
    const err = await rejects(again.readFile(keys[0]), 'ECORRUPT')
    expect(err.message).to.contain('repair of it was interrupted').and.to.contain('kfs repair 5')
    expect((await again.verify()).problems.map((p) => p.kind)).to.deep.equal(['shard'])
    const result = await again.repair(5)
    expect(result.files).to.equal(2)
    expect(result.dropped.map((d) => d.key)).to.deep.equal([keys[1]])
    expect((await again.verify()).problems).to.deep.equal([])
    const usage = await again.usage()
    expect(usage).to.include({ files: 2, used: 8 * C })
    await again.close()
    const reopened = t.open() // the figures survive a restart
    expect((await reopened.usage()).used).to.equal(8 * C)
    expect(await collect(reopened.list())).to.have.length(2)
    await reopened.close()
    await assertNoStrayChunks(t.dir)
  })

  it('is not refused because another operation on the shard is failing at that moment', async () => {
    const store = t.open({ shardCount: 1 })
    await store.writeFile('a', 'hello')
    await store.close()
    fs.rmSync(path.join(store.location, '000.s', 'CURRENT'))
    const again = t.open()
    await again.open()
    const [read, repaired] = await Promise.allSettled([again.readFile('a'), again.repair(0)])
    expect(read.reason.code).to.equal('ECORRUPT')
    expect(repaired.status, repaired.reason && repaired.reason.message).to.equal('fulfilled')
    expect((await again.readFile('a')).toString()).to.equal('hello')
  })

  it('refuses a shard that was never created with ENOENT, creating nothing', async () => {
    // One shard open at most: the shard written holds the slot, and no shard is made
    // ahead past the first (lib/shard/shards.js, openAhead).
    const store = t.open({ referenceId: REF, maxOpenShards: 1 })
    await store.writeFile(keyInShard(REF, 1, 'x'), 'x')
    const err = await rejects(store.repair(5), 'ENOENT')
    expect(err.message).to.contain('shard 005')
    expect(fs.existsSync(path.join(store.location, '005.s'))).to.equal(false)
    await store.close()
    await rejects(t.open({ maxOpenShards: 1 }).repair(6), 'ENOENT') // also before the store is open
    expect(fs.readdirSync(store.location).filter((e) => e.endsWith('.s'))).to.not.include.members(['005.s', '006.s'])
  })

  describe('head records (format 3)', () => {
    // Files in shard 3: a, 4 chunks; s, its data in its head; o, of format 2 (no head);
    // then `damage(db, keys)` on the closed store's shard.
    async function damaged (damage) {
      const keys = { a: keyInShard(REF, 3, 'a'), s: keyInShard(REF, 3, 's'), o: keyInShard(REF, 3, 'o') }
      const store = t.open({ referenceId: REF, chunkSize: C })
      await store.writeFile(keys.o, bytes(2 * C + 5, 'o'))
      await store.close()
      await toFormat2(store.location)
      const again = t.open({ chunkSize: C })
      await again.writeFile(keys.a, bytes(3 * C + 7, 'a'))
      await again.writeFile(keys.s, bytes(700, 's'))
      await again.close()
      const db = await LevelDb.open(path.join(store.location, '003.s'))
      try {
        await damage(db, keys)
      } finally {
        await db.close()
      }
      return { keys, store: t.open({ chunkSize: C }) }
    }

    it('keeps every sound file, of format 3 and 2, and leaves no stray record', async () => {
      const { keys, store } = await damaged(async () => {})
      const result = await store.repair(3)
      expect(result).to.include({ files: 3 })
      expect(result.dropped).to.deep.equal([])
      expect(result.remade).to.deep.equal([])
      for (const [name, key] of Object.entries(keys)) expect((await store.readFile(key)).equals(bytes({ a: 3 * C + 7, s: 700, o: 2 * C + 5 }[name], name)), name).to.equal(true)
      expect((await store.verify()).problems).to.deep.equal([])
      await store.close()
      await assertNoStrayChunks(t.dir)
    })

    it('a file whose head record was lost, or is an older version\'s, is kept: its head made again from its metadata', async () => {
      let old
      const { keys, store } = await damaged(async (db, keys) => {
        old = await db.get(keys.s)
        await db.batch([{ type: 'del', key: keys.a }])
      })
      expect((await rejects(store.readFile(keys.a), 'EINTEGRITY')).message).to.contain('its head record is missing')
      const result = await store.repair(3)
      expect(result.dropped).to.deep.equal([])
      expect(result.remade).to.deep.equal([{ key: keys.a, problem: `file ${keys.a} is damaged: its head record is missing: its head record was made again from its metadata record` }])
      expect((await store.readFile(keys.a)).equals(bytes(3 * C + 7, 'a'))).to.equal(true)
      expect((await store.verify()).problems).to.deep.equal([])
      // An older head left over a version whose data is in chunks.
      await store.writeFile(keys.s, bytes(5 * C, 's2'))
      await store.close()
      const db = await LevelDb.open(path.join(store.location, '003.s'))
      await db.put(keys.s, old)
      await db.close()
      const again = t.open({ chunkSize: C })
      expect((await again.verify()).problems[0].problem).to.match(/its head record is of version/)
      expect((await again.repair(3)).remade.map((r) => r.key)).to.deep.equal([keys.s])
      expect((await again.readFile(keys.s)).equals(bytes(5 * C, 's2'))).to.equal(true)
      await again.close()
      await assertNoStrayChunks(t.dir)
    })

    it('a file whose metadata record was lost is kept from its head record, without its name; one whose head is damaged too is dropped and reported', async () => {
      const { keys, store } = await damaged(async (db, keys) => {
        await db.batch([{ type: 'del', key: '!m!' + keys.s }, { type: 'del', key: '!m!' + keys.a }])
        const head = Buffer.from(await db.get(keys.a))
        head[40] ^= 1
        await db.put(keys.a, head)
      })
      const result = await store.repair(3)
      expect(result.remade).to.deep.equal([{ key: keys.s, problem: 'its metadata record was lost: it was made again from its head record (a name the file had is lost)' }])
      expect(result.dropped).to.deep.equal([{ key: keys.a, problem: 'its metadata was lost; its head record was found' }])
      expect(result).to.include({ files: 2, used: 700 + 2 * C + 5 })
      expect((await store.readFile(keys.s)).equals(bytes(700, 's'))).to.equal(true)
      expect((await store.stat(keys.s)).size).to.equal(700)
      await rejects(store.readFile(keys.a), 'ENOENT')
      expect((await store.verify()).problems).to.deep.equal([])
      await store.close()
      await assertNoStrayChunks(t.dir)
    })
  })
})

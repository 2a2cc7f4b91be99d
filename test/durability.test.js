'use strict'

// Durability without strace (test/system/durability-strace.test.js traces the system
// calls): a synced write whose directory sync fails was made, and is never undone.
const { expect } = require('chai')
const path = require('node:path')
const { useTmp, scaled } = require('./helpers')

const MiB = 1024 * 1024

// A synced write that needs its directory synced (after LevelDB started a new log) and
// whose directory sync fails: the write was made, so nobody may undo it.
describe('a directory sync that fails after a synced write', function () {
  this.timeout(scaled(60000))
  const t = useTmp()
  const fsp = require('node:fs/promises')
  const { LevelDb, madeNotDurable, notDurable } = require('../lib/leveldb/leveldb')
  const records = require('../lib/shard/records')
  const open = fsp.open
  const batch = LevelDb.prototype.batch
  afterEach(() => {
    fsp.open = open
    LevelDb.prototype.batch = batch
  })

  it('LevelDb: a synced batch written during a compaction whose directory sync fails rejects with EIO, marked as made, and is applied', async () => {
    const db = await LevelDb.open(path.join(t.dir, 'db'), { createIfMissing: true })
    try {
      fsp.open = async (file, flags, ...rest) => {
        if (flags === 'r' && file === db.location) throw Object.assign(new Error(`EIO: i/o error, open '${file}'`), { code: 'EIO', syscall: 'open' })
        return open(file, flags, ...rest)
      }
      const compacting = db.compactRange('\x00', '\xff')
      const err = await db.batch([{ type: 'put', key: 'k', value: 'v' }], { sync: true }).then(() => undefined, (e) => e)
      await compacting
      expect(err, 'the batch was rejected').to.be.an('error')
      expect(err.code).to.equal('EIO')
      expect(madeNotDurable(err)).to.equal(true)
      expect(err.message).to.match(/may not survive a power cut/)
      expect(String(await db.get('k'))).to.equal('v')
      // Unsynced writes never sync the directory.
      const unsynced = db.compactRange('\x00', '\xff')
      await db.batch([{ type: 'put', key: 'k2', value: 'v' }])
      await unsynced
    } finally {
      await db.close()
    }
  })

  it('a commit or unlink rejected with `written` is taken as made: the file is the new version (or gone), whole, with exact accounting', async () => {
    const store = require('..')(path.join(t.dir, 'store'), { sync: true, shardCount: 1 })
    const old = Buffer.alloc(3 * MiB, 1)
    const data = Buffer.alloc(3 * MiB + 5, 2) // four batches: the chunks are written before the commit
    await store.writeFile('k', old)
    await store.writeFile('other', 'x')
    // The next commit or unlink batch is applied, then rejected as LevelDb#write does
    // when the directory sync after it fails.
    let failNext = false
    LevelDb.prototype.batch = function (ops, options) {
      const done = batch.call(this, ops, options)
      if (!failNext || !ops.some((op) => op.key.startsWith(records.metaKey('')))) return done
      failNext = false
      return done.then(() => { throw notDurable('shard 000', 0, Object.assign(new Error('EIO: i/o error, fsync'), { code: 'EIO' })) })
    }
    failNext = true
    const err = await store.writeFile('k', data).then(() => undefined, (e) => e)
    expect(err, 'the write was rejected').to.be.an('error')
    expect(err.written).to.equal(true)
    expect(err.code).to.equal('EIO')
    expect(err.message).to.match(/made and is visible, but may not survive a power cut/)
    expect((await store.readFile('k')).equals(data)).to.equal(true)
    let usage = await store.usage()
    expect([usage.files, usage.used]).to.deep.equal([2, data.length + 1])

    failNext = true
    const unlinkErr = await store.unlink('k').then(() => undefined, (e) => e)
    expect(unlinkErr, 'the unlink was rejected').to.be.an('error')
    expect(unlinkErr.written).to.equal(true)
    expect(await store.exists('k')).to.equal(false)
    usage = await store.usage()
    expect([usage.files, usage.used]).to.deep.equal([1, 1])
    expect((await store.verify()).problems).to.deep.equal([])
    await store.close()
  })
})

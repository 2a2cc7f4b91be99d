'use strict'

// What a power cut can leave of LevelDB's own steps on a filesystem that writes back
// any subset of the calls since the last fsync (lib/leveldb/power-cut.js), built here
// from copies of a database taken between those steps. test/system/crash-states.test.js
// meets the same states under its subset model.
const { expect } = require('chai')
const fs = require('node:fs')
const path = require('node:path')
const leveldown = require('leveldown')
const { LevelDb } = require('../lib/leveldb/leveldb')
const { useTmp } = require('./helpers')

const KEYS = 50
const keys = (prefix) => Array.from({ length: KEYS }, (_, i) => `${prefix}-${String(i).padStart(3, '0')}`)

// The raw binding: what LevelDB alone does.
function raw (dir) {
  const db = leveldown(dir)
  const call = (method, ...args) => new Promise((resolve, reject) => db[method](...args, (err, value) => (err ? reject(err) : resolve(value))))
  return {
    open: () => call('open', { createIfMissing: true }),
    put: (k, v) => call('put', k, v),
    flush: () => call('compactRange', '\x00', '\x00'),
    close: () => call('close')
  }
}

const current = (dir) => fs.readFileSync(path.join(dir, 'CURRENT'), 'latin1').trim()
const named = (dir, pattern) => fs.readdirSync(dir).filter((name) => pattern.test(name))
// The database's files, but LevelDB's info log and lock file, which every open attempt
// changes.
const snapshot = (dir) => Object.fromEntries(fs.readdirSync(dir).filter((name) => !/^(LOG|LOG\.old|LOCK)$/.test(name)).map((name) => [name, fs.readFileSync(path.join(dir, name)).toString('base64')]))

async function openFails (dir, options) {
  const err = await LevelDb.open(dir, options).then(async (db) => {
    await db.close()
    return undefined
  }, (e) => e)
  expect(err, 'the open should fail').to.be.an('error')
  expect(err.reason).to.equal('damaged')
  return err
}

async function readsAll (dir, list) {
  const db = await LevelDb.open(dir)
  try {
    for (const k of list) expect(String(await db.get(k)), k).to.equal(`value of ${k}`)
  } finally {
    await db.close()
  }
}

describe('power cut: LevelDB states kfs puts right before opening', function () {
  const tmp = useTmp()
  let dir, cut
  beforeEach(() => {
    dir = path.join(tmp.dir, 'db')
    cut = path.join(tmp.dir, 'cut')
  })

  // A flush whose manifest edit persisted while its new table's name did not: the
  // database as copied just before the flush, with the manifest as it was just after.
  async function flushCut () {
    const db = raw(dir)
    await db.open()
    for (const k of keys('a')) await db.put(k, `value of ${k}`)
    await db.flush()
    for (const k of keys('b')) await db.put(k, `value of ${k}`)
    fs.cpSync(dir, cut, { recursive: true })
    const tablesBefore = named(dir, /\.ldb$/)
    await db.flush()
    const manifest = current(dir)
    fs.copyFileSync(path.join(dir, manifest), path.join(cut, manifest))
    const table = named(dir, /\.ldb$/).find((name) => !tablesBefore.includes(name))
    await db.close()
    expect(table, 'the flush made a table').to.be.a('string')
    expect(fs.existsSync(path.join(cut, table))).to.equal(false)
    fs.rmSync(path.join(cut, 'LOCK'), { force: true })
    return { table }
  }

  it('a manifest naming a table whose name was lost: its last edit is cut off, every write reads back', async () => {
    await flushCut()
    await readsAll(cut, [...keys('a'), ...keys('b')])
  })

  it('a read-only open leaves such a database as it is, damaged', async () => {
    await flushCut()
    const before = snapshot(cut)
    const err = await openFails(cut, { readOnly: true })
    expect(err.message).to.match(/missing files/)
    expect(snapshot(cut)).to.deep.equal(before)
  })

  it('not when the log the edit flushed is gone too, nor for an older table: that is damage, left as it is', async () => {
    await flushCut()
    for (const log of named(cut, /\.log$/)) fs.rmSync(path.join(cut, log))
    const before = snapshot(cut)
    expect((await openFails(cut)).message).to.match(/missing files/)
    expect(snapshot(cut)).to.deep.equal(before)

    fs.rmSync(cut, { recursive: true })
    fs.rmSync(dir, { recursive: true })
    await flushCut()
    fs.rmSync(path.join(cut, named(cut, /\.ldb$/)[0])) // the first flush's table, in an edit long synced
    const damaged = snapshot(cut)
    expect((await openFails(cut)).message).to.match(/missing files/)
    expect(snapshot(cut)).to.deep.equal(damaged)
  })

  // An open whose deletion of the old manifest persisted while its rename of CURRENT to
  // the new one did not: the database after the open, with CURRENT as before it.
  async function currentCut () {
    const db = raw(dir)
    await db.open()
    for (const k of keys('a')) await db.put(k, `value of ${k}`)
    await db.close()
    const old = fs.readFileSync(path.join(dir, 'CURRENT'))
    await db.open()
    await db.close()
    fs.cpSync(dir, cut, { recursive: true })
    fs.writeFileSync(path.join(cut, 'CURRENT'), old)
    expect(fs.existsSync(path.join(cut, current(cut)))).to.equal(false)
  }

  it('CURRENT naming a manifest an open deleted: it is pointed to the newer one, every write reads back', async () => {
    await currentCut()
    await readsAll(cut, keys('a'))
    expect(fs.existsSync(path.join(cut, current(cut)))).to.equal(true)
  })

  it('not when the newer manifest names a table that is missing: damage, left as it is', async () => {
    await currentCut()
    for (const table of named(cut, /\.ldb$/)) fs.rmSync(path.join(cut, table))
    const before = snapshot(cut)
    expect((await openFails(cut)).message).to.match(/MANIFEST-\d+: No such file/)
    expect(snapshot(cut)).to.deep.equal(before)
  })
})

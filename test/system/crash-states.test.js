'use strict'

// Power cuts: every workload of test/crash/workloads.js is recorded under a FUSE
// filesystem (test/crash/recordfs.py), and the states a power cut could leave are
// built under four models of a filesystem (test/crash/states.js) and opened, each in
// a fresh process. `node test/crash/run.js` checks every state instead of a spread.
// The models' own tests, then the first part of the workloads (power-cut-suite.js);
// crash-states-2.test.js runs the others, in a process of its own.
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { expect } = require('chai')
const { powerCutSuite } = require('./power-cut-suite')
const { readLog, crashStates, cutPoints, materialize, expectations, judge } = require('../crash/states')

describe('crash states: the models', function () {
  let dir
  beforeEach(() => { dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kfs-states-')) })
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }))

  // A recorded run, written as recordfs.py writes it.
  function logOf (entries, data = '') {
    fs.writeFileSync(path.join(dir, 'ops.jsonl'), entries.map((e) => JSON.stringify(e)).join('\n') + '\n')
    fs.writeFileSync(path.join(dir, 'data.bin'), data)
    return readLog(dir)
  }
  // The files of each model's state at `cut`, as { path: content }.
  function disks (log, cut) {
    const out = {}
    for (const state of crashStates(log, [cut])) {
      const at = path.join(fs.mkdtempSync(path.join(dir, 'state-')), 'disk')
      materialize(log, dir, state.entries, at)
      const files = {}
      for (const e of state.entries) files[e.path] = e.type === 'd' ? 'dir' : fs.readFileSync(path.join(at, e.path), 'utf8')
      ;(out[state.model] = out[state.model] || []).push(files)
    }
    return out
  }

  // mkdir d; create d/f; write "hello"; fsync f; fsyncdir d; write "!"; rename f to g;
  // fsyncdir / (then d's entry is durable).
  const run = [
    { o: 'create', p: '/d', i: 2, t: 'd' },
    { o: 'create', p: '/d/f', i: 3, t: 'f' },
    { o: 'w', i: 3, off: 0, n: 5, d: 0 },
    { o: 'fsync', i: 3 },
    { o: 'fsyncdir', p: '/d' },
    { o: 'w', i: 3, off: 5, n: 1, d: 5 },
    { o: 'rename', a: '/d/f', b: '/d/g' },
    { o: 'fsyncdir', p: '/' }
  ]

  it('prefix: every call up to the cut', () => {
    const log = logOf(run, 'hello!')
    expect(disks(log, 3).prefix).to.deep.equal([{ '/d': 'dir', '/d/f': 'hello' }])
    expect(disks(log, 7).prefix).to.deep.equal([{ '/d': 'dir', '/d/g': 'hello!' }])
  })

  it('posix: a name only once its directory is synced, data only once its file is', () => {
    const log = logOf(run, 'hello!')
    // d's own entry in / is not durable until / is synced: nothing survives.
    expect(disks(log, 7).posix).to.deep.equal([{}])
    // Then d holds f as of its sync (the rename came after), with the synced data.
    expect(disks(log, 8).posix).to.deep.equal([{ '/d': 'dir', '/d/f': 'hello' }])
  })

  it('journal: data as of its fsync, names as of the last fsync or as of the cut', () => {
    const log = logOf(run, 'hello!')
    expect(disks(log, 7).journal).to.deep.equal([{ '/d': 'dir', '/d/f': 'hello' }, { '/d': 'dir', '/d/g': 'hello' }])
    // A file created and written but never synced is empty once its name is durable.
    const unsynced = logOf([{ o: 'create', p: '/f', i: 2, t: 'f' }, { o: 'w', i: 2, off: 0, n: 3, d: 0 }, { o: 'fsyncdir', p: '/' }], 'abc')
    expect(disks(unsynced, 3).journal).to.deep.equal([{ '/f': '' }, { '/f': '' }])
    expect(disks(unsynced, 3).posix).to.deep.equal([{ '/f': '' }])
  })

  it('subset: posix plus the calls since the last fsync: all, the writes alone, the names alone, all names but one', () => {
    // A table made and synced, the manifest's edit naming it written, the cut before
    // the directory sync: the edit may persist while the table's name does not.
    fs.writeFileSync(path.join(dir, 'm'), 'M')
    const table = logOf([
      { o: 'have', p: '/m', i: 2, t: 'f' },
      { o: 'create', p: '/t', i: 3, t: 'f' },
      { o: 'w', i: 3, off: 0, n: 3, d: 0 },
      { o: 'fsync', i: 3 },
      { o: 'w', i: 2, off: 1, n: 1, d: 3 },
      { o: 'fsyncdir', p: '/' }
    ], 'tabe')
    expect(disks(table, 4).posix).to.deep.equal([{ '/m': 'M' }])
    expect(disks(table, 4).subset).to.deep.equal([{ '/m': 'Me' }])
    // After the directory sync nothing is since the last fsync: posix alone.
    expect(disks(table, 5).posix).to.deep.equal([{ '/m': 'M', '/t': 'tab' }])
    expect(disks(table, 5).subset).to.equal(undefined)
    // CURRENT renamed to the new manifest, the old one removed, the cut before the
    // directory sync: the removal may persist while the rename does not.
    for (const name of ['CURRENT', 'A', 'B']) fs.writeFileSync(path.join(dir, name), name === 'CURRENT' ? 'A' : name)
    const current = logOf([
      { o: 'have', p: '/A', i: 2, t: 'f' },
      { o: 'have', p: '/B', i: 3, t: 'f' },
      { o: 'have', p: '/CURRENT', i: 4, t: 'f' },
      { o: 'create', p: '/c', i: 5, t: 'f' },
      { o: 'w', i: 5, off: 0, n: 1, d: 0 },
      { o: 'fsync', i: 5 },
      { o: 'rename', a: '/c', b: '/CURRENT' },
      { o: 'unlink', p: '/A' },
      { o: 'fsyncdir', p: '/' }
    ], 'B')
    expect(disks(current, 5).posix).to.deep.equal([{ '/A': 'A', '/B': 'B', '/CURRENT': 'A' }])
    expect(disks(current, 5).subset).to.have.deep.members([
      { '/B': 'B', '/CURRENT': 'B' }, // all
      { '/B': 'B', '/CURRENT': 'A' }, // all names but the rename
      { '/A': 'A', '/B': 'B', '/CURRENT': 'B' } // all names but the removal
    ])
  })

  it('hard links are one file, removed names are gone, and cuts fall around every fsync', () => {
    const log = logOf([
      { o: 'create', p: '/f', i: 2, t: 'f' },
      { o: 'w', i: 2, off: 0, n: 2, d: 0 },
      { o: 'link', p: '/g', i: 2 },
      { o: 'fsync', i: 2 },
      { o: 'unlink', p: '/f' },
      { o: 'fsyncdir', p: '/' }
    ], 'ab')
    expect(disks(log, 4).prefix).to.deep.equal([{ '/f': 'ab', '/g': 'ab' }])
    expect(disks(log, 6).posix).to.deep.equal([{ '/g': 'ab' }])
    expect(cutPoints(log)).to.deep.equal([0, 1, 3, 4, 5, 6])
  })

  it('no cut splits libfuse hiding an open file from the rename over its name', () => {
    const log = logOf([
      { o: 'have', p: '/c', i: 2, t: 'f' },
      { o: 'create', p: '/t', i: 3, t: 'f' },
      { o: 'unlink', p: '/c', hidden: true },
      { o: 'rename', a: '/t', b: '/c' },
      { o: 'w', i: 3, off: 0, n: 1, d: 0 },
      { o: 'fsyncdir', p: '/' }
    ], 'x')
    // Halfway to the fsync would be 2: between the hiding and the rename.
    expect(cutPoints(log)).to.deep.equal([0, 4, 5])
  })

  it('what may be read: a synced write once resolved, before that the old or the new version', () => {
    const log = logOf([{ o: 'mark', t: 'begin open' }, { o: 'mark', t: 'ack open' }, { o: 'mark', t: 'begin 0' }, { o: 'mark', t: 'ack 0' }, { o: 'mark', t: 'begin 1' }])
    const outcomes = [{ key: 'a', sha256: 'A1', sync: true }, { key: 'a', sha256: 'A2', sync: true }, { key: 'b', sha256: 'B', sync: false }]
    expect(expectations(log, outcomes, 3).keys.get('a').allowed).to.deep.equal([null, 'A1'])
    expect(expectations(log, outcomes, 4).keys.get('a').allowed).to.deep.equal(['A1'])
    expect(expectations(log, outcomes, 5).keys.get('a').allowed).to.deep.equal(['A1', 'A2'])
    expect(expectations(log, outcomes, 5).keys.get('b').allowed).to.deep.equal([null])
    const expected = expectations(log, outcomes, 5)
    expect(judge(expected, { opened: true, reads: { a: 'A2', b: 'ENOENT' } })).to.deep.equal([])
    expect(judge(expected, { opened: true, reads: { a: 'ENOENT', b: 'ENOENT' } })).to.have.length(1)
    expect(judge(expected, { opened: true, reads: { a: 'EINTEGRITY', b: 'ENOENT' } })).to.have.length(1)
    expect(judge(expected, { opened: false, error: 'ECORRUPT' })).to.deep.equal(['did not open: ECORRUPT'])
  })
})

powerCutSuite(0)

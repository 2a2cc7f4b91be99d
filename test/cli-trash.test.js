'use strict'

const { expect } = require('chai')
const fs = require('node:fs')
const os = require('node:os')
const { PassThrough } = require('node:stream')
const { scaled } = require('./helpers')
const { useCli } = require('./cli-harness')
const { holder } = require('./share-harness')
const commands = require('../lib/cli/commands')

// The rows of `kfs stat`: { name: value }.
const rowsOf = (stdout) => Object.fromEntries(stdout.toString().trim().split('\n').map((line) => line.split(/^(\S+) +/).slice(1)))

// The trash commands: kfs trash KEY, kfs restore-trash, kfs empty-trash [--before WHEN].
describe('kfs trash, restore-trash and empty-trash', function () {
  this.timeout(scaled(60000))
  const c = useCli()
  const { cli } = c

  describe('their arguments', () => {
    it('a missing key, an extra argument or a bad --before is a usage error, exit 2, one kfs: line, nothing created', async () => {
      const shapes = 'must be a duration such as 30s, 15m, 1h or 7d, or a date such as 2026-12-01 or 2026-12-01T10:00:00Z'
      const cases = [
        [['trash'], "kfs: missing required argument 'key'; see 'kfs trash --help'\n"],
        [['trash', 'a', 'b'], "kfs: too many arguments for 'trash'. Expected 1 argument but got 2; see 'kfs trash --help'\n"],
        [['restore-trash', 'x'], "kfs: too many arguments for 'restore-trash'. Expected 0 arguments but got 1; see 'kfs restore-trash --help'\n"],
        [['empty-trash', 'x'], "kfs: too many arguments for 'empty-trash'. Expected 0 arguments but got 1; see 'kfs empty-trash --help'\n"],
        [['empty-trash', '--before'], "kfs: option '--before <when>' argument missing; see 'kfs empty-trash --help'\n"],
        [['empty-trash', '--before', 'last week'], `kfs: option '--before <when>' argument 'last week' is invalid. ${shapes}; see 'kfs empty-trash --help'\n`],
        [['empty-trash', '--before', '2030-02-30'], `kfs: option '--before <when>' argument '2030-02-30' is invalid. ${shapes}; see 'kfs empty-trash --help'\n`],
        [['empty-trash', '--before', '99999999999d'], "kfs: option '--before <when>' argument '99999999999d' is invalid. is beyond the times a date can hold; see 'kfs empty-trash --help'\n"]
      ]
      for (const [args, stderr] of cases) expect(await cli(args), args.join(' ')).to.include({ code: 2, stderr })
      expect(fs.existsSync(c.db)).to.equal(false)
    })

    it('each is refused on a store opened --read-only, before anything is done', async () => {
      await cli(['put'], { input: 'x' })
      for (const args of [['trash', 'k'], ['restore-trash'], ['empty-trash']]) {
        const r = await cli(['--read-only', ...args])
        expect(r.code, args[0]).to.equal(1)
        expect(r.stderr, args[0]).to.equal(`kfs: the store at ${c.db} is opened with --read-only: kfs ${args[0]} would change it; get, exists, stat, list and verify read it\n`)
      }
    })
  })

  describe('stat\'s trash figures', () => {
    // `kfs stat` (options) of a store whose usage() is `usage`: its output.
    async function statOf (usage, options = {}) {
      const stdout = new PassThrough()
      let text = ''
      stdout.on('data', (d) => (text += d))
      const store = { usage: async () => usage, diskUsage: async () => 100, location: os.tmpdir(), heldBy: process.pid, takenOver: false, shardCount: 256 }
      expect(await commands.stat(store, { stdout, json: false }, undefined, options)).to.equal(0)
      return text
    }
    const shard = (index, trash) => ({ index, used: 10, free: 90, files: 1, diskBytes: 50, reclaimable: 0, ...(trash && { trash }) })
    const usage = (trash) => ({ used: 20, free: 180, capacity: 200, reclaimable: 0, files: 2, reserve: 0, ...(trash && { trash }), shards: [shard(0, trash && { files: 1, bytes: 2048 }), shard(1, trash && { files: 0, bytes: 0 })] })

    it('a trash row, and a column per shard, where usage() counts the trash', async () => {
      const rows = rowsOf(await statOf(usage({ files: 1, bytes: 2048 }), { human: true }))
      expect(rows.trash).to.equal('2.0 KiB (1 file)')
      expect(Object.keys(rows)).to.deep.equal(['used', 'free', 'capacity', 'reclaimable', 'trash', 'files', 'shards', 'disk', 'reserve', 'holder'])
      const lines = (await statOf(usage({ files: 1, bytes: 2048 }), { shards: true })).trim().split('\n').map((line) => line.split(/ {2,}/))
      expect(lines).to.deep.equal([
        ['shard', 'used', 'free', 'files', 'disk', 'reclaimable', 'trash'],
        ['000', '10', '90', '1', '50', '0', '2048 (1 file)'],
        ['001', '10', '90', '1', '50', '0', '0 (0 files)'],
        ['total', '20', '180', '2', 'capacity 200', '0', '2048 (1 file)']
      ])
    })

    it('none where usage() does not count it', async () => {
      expect(rowsOf(await statOf(usage()))).to.not.have.property('trash')
      expect((await statOf(usage(), { shards: true })).split('\n')[0].split(/ {2,}/)).to.deep.equal(['shard', 'used', 'free', 'files', 'disk', 'reclaimable'])
    })
  })

  describe('on a store', function () {
    // Stores `text` under the name `name`; resolves to its key.
    const put = async (name, text) => (await cli(['put', '--key', name], { input: text })).stdout.toString().trim()

    it('trash KEY: the file is gone to readers, counted in stat\'s trash; a missing key is exit 1, a bad one exit 2', async () => {
      await put('a', 'aaaa')
      await put('b', 'bb')
      expect(await cli(['trash', 'a'])).to.deep.include({ code: 0, stderr: '', stdout: Buffer.alloc(0) })
      const key = JSON.parse((await cli(['stat', '--json', 'b'])).stdout).key
      expect(await cli(['get', 'a'])).to.include({ code: 1 })
      expect(await cli(['exists', 'a'])).to.include({ code: 1 })
      expect((await cli(['list'])).stdout.toString()).to.equal(`${key}\t2\tb\n`)
      expect(rowsOf((await cli(['stat'])).stdout).trash).to.equal('4 (1 file)')
      const missing = await cli(['trash', 'a'])
      expect(missing.code).to.equal(1)
      expect(missing.stderr).to.match(/^kfs: no file named "a" /)
      expect(JSON.parse((await cli(['--json', 'trash', 'nothing'])).stderr).error).to.include({ code: 'ENOENT' })
      expect(await cli(['trash', ''])).to.include({ code: 2 })
    })

    it('restore-trash brings every trashed file back and prints what it restored; --json { files, bytes }', async () => {
      await put('a', 'aaaa')
      await put('b', 'bb')
      await cli(['trash', 'a'])
      await cli(['trash', 'b'])
      expect(await cli(['restore-trash'])).to.deep.include({ code: 0, stderr: '', stdout: Buffer.from('restored 2 files (6 B) from the trash\n') })
      expect((await cli(['get', 'a'])).stdout.toString()).to.equal('aaaa')
      expect((await cli(['get', 'b'])).stdout.toString()).to.equal('bb')
      expect(JSON.parse((await cli(['--json', 'restore-trash'])).stdout)).to.deep.equal({ files: 0, bytes: 0 })
    })

    it('empty-trash removes every trashed file for good, and prints what it removed', async () => {
      await put('a', 'aaaa')
      await put('b', 'bb')
      await cli(['trash', 'a'])
      expect(await cli(['empty-trash'])).to.deep.include({ code: 0, stderr: '', stdout: Buffer.from('removed 1 file (4 B) in the trash for good\n') })
      expect((await cli(['restore-trash'])).stdout.toString()).to.equal('restored 0 files (0 B) from the trash\n')
      expect(await cli(['get', 'a'])).to.include({ code: 1 })
      expect((await cli(['get', 'b'])).stdout.toString()).to.equal('bb')
    })

    it('empty-trash --before a date removes the files trashed before it; a duration means trashed more than that long ago', async () => {
      await put('old', 'old!')
      await put('new', 'new')
      await cli(['trash', 'old'])
      const between = new Date(Date.now() + 1)
      await new Promise((resolve) => setTimeout(resolve, 20))
      await cli(['trash', 'new'])
      expect((await cli(['empty-trash', '--before', '1h'])).stdout.toString()).to.match(/^removed 0 files \(0 B\) trashed before \S+ for good\n$/)
      const removed = await cli(['empty-trash', '--before', between.toISOString()])
      expect(removed).to.deep.include({ code: 0, stderr: '', stdout: Buffer.from(`removed 1 file (4 B) trashed before ${between.toISOString()} for good\n`) })
      expect(JSON.parse((await cli(['--json', 'empty-trash', '--before', '0s'])).stdout)).to.deep.equal({ files: 1, bytes: 3 })
      expect((await cli(['restore-trash'])).stdout.toString()).to.equal('restored 0 files (0 B) from the trash\n')
    })

    it('through the process holding the store', async () => {
      await put('a', 'aaaa')
      const held = await holder(c.db)
      try {
        expect(await cli(['trash', 'a'])).to.include({ code: 0, stderr: '' })
        expect(await cli(['exists', 'a'])).to.include({ code: 1 })
        expect((await cli(['restore-trash'])).stdout.toString()).to.equal('restored 1 file (4 B) from the trash\n')
        await cli(['trash', 'a'])
        expect((await cli(['empty-trash'])).stdout.toString()).to.equal('removed 1 file (4 B) in the trash for good\n')
      } finally {
        await held.stop()
      }
    })
  })
})

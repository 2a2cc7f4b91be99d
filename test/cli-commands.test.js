'use strict'

const { expect } = require('chai')
const fs = require('node:fs')
const path = require('node:path')
const kfs = require('..')
const { bytes, scaled } = require('./helpers')
const { diskUsage } = require('../lib/dir/disk-usage')
const { useCli } = require('./cli-harness')

// The command line as a process: unlink, exists, stat, list, compact, verify and repair.
describe('kfs command line', function () {
  this.timeout(scaled(60000))
  const c = useCli()
  const { t, cli, file } = c

  describe('other commands', () => {
    it('exists prints true/false and exits 0/1; unlink removes', async () => {
      const key = (await cli(['put'], { input: 'x' })).stdout.toString().trim()
      expect(await cli(['exists', key])).to.deep.include({ code: 0, stderr: '' })
      expect((await cli(['exists', key])).stdout.toString()).to.equal('true\n')
      expect((await cli(['unlink', key])).code).to.equal(0)
      const gone = await cli(['exists', key])
      expect(gone.code).to.equal(1)
      expect(gone.stdout.toString()).to.equal('false\n')
    })

    it('stat shows a file, in plain, human and JSON forms', async () => {
      await cli(['put', '--key', 'doc'], { input: bytes(2 * 1024 * 1024) })
      const plain = (await cli(['stat', 'doc'])).stdout.toString()
      expect(plain).to.match(/^key +[0-9a-f]{40}$/m).and.to.match(/^size +2097152$/m).and.to.match(/^chunks +16$/m)
      expect(plain).to.match(/^shard +\d{3}$/m).and.to.match(/^mtime +\d{4}-/m).and.to.match(/^name +doc$/m)
      expect((await cli(['stat', '-H', 'doc'])).stdout.toString()).to.match(/^size +2\.0 MiB$/m)
      const json = JSON.parse((await cli(['stat', '--json', 'doc'])).stdout)
      expect(json).to.include({ size: 2097152, chunks: 16, name: 'doc' })
      expect(new Date(json.mtime).getTime()).to.be.above(0)
    })

    it('stat without a key shows a summary of the store\'s usage; --shards a row per shard; --json both', async () => {
      // Every shard made first: each command makes those not made yet while it runs.
      const store = kfs(c.db)
      await store.open()
      while ((await store.usage()).shards.length < 256) await new Promise((resolve) => setTimeout(resolve, 50))
      await store.close()
      await cli(['put'], { input: 'one' })
      await cli(['put'], { input: 'two!' })
      const json = JSON.parse((await cli(['stat', '--json'])).stdout)
      expect(json).to.include({ used: 7, files: 2 })
      expect(json.shards).to.have.length(256)
      expect(json.shards.filter((s) => s.files > 0).length).to.be.within(1, 2)
      expect(json.reserve).to.equal(16 * 1024 * 1024) // the disk reserve's default
      const summary = await cli(['stat'])
      expect(summary).to.include({ code: 0, stderr: '' })
      // disk: the store's files, which each command's open changes a little (LevelDB's logs).
      const rows = summary.stdout.toString().replace(/^disk +\d+$/m, 'disk      N')
      expect(rows).to.equal([['used', 7], ['free', 8 * 1024 ** 4 - 7], ['capacity', 8 * 1024 ** 4], ['files', 2],
        ['shards', `${json.shards.length} of 256 created`], ['disk', 'N'], ['reserve', json.reserve]].map(([name, value]) => `${name.padEnd(8)}  ${value}\n`).join(''))
      const human = (await cli(['stat', '-H'])).stdout.toString()
      expect(human).to.match(/^used +7 B\nfree +8\.0 TiB\ncapacity +8\.0 TiB\nfiles +2\nshards +256 of 256 created\ndisk +[\d.]+ (B|KiB|MiB)\nreserve +16\.0 MiB\n$/)
      const shards = (await cli(['stat', '--shards', '--human'])).stdout.toString()
      expect(shards).to.match(/^shard +used +free +files +disk$/m)
      expect(shards).to.match(/^total +7 B +8\.0 TiB +2 +capacity 8\.0 TiB$/m)
      expect(shards).to.contain('32.0 GiB')
      expect(shards.trim().split('\n')).to.have.length(json.shards.length + 2)
      const withShards = JSON.parse((await cli(['stat', '--json', '--shards'])).stdout)
      expect({ ...withShards, disk: 0 }).to.deep.equal({ ...json, disk: 0 })
      expect(await cli(['stat', '--shards', 'somefile'])).to.include({ code: 2, stderr: 'kfs: --shards shows the store\'s shards: give no key\n' })
    })

    it('list prints key, size and name per line, or JSON lines, per shard on request', async () => {
      await cli(['put', '--key', 'named'], { input: 'abc' })
      const key = (await cli(['put'], { input: 'defg' })).stdout.toString().trim()
      const lines = (await cli(['list'])).stdout.toString().split('\n').filter(Boolean).sort()
      expect(lines).to.have.length(2)
      expect(lines).to.include(`${key}\t4\t`)
      expect(lines.find((l) => l.endsWith('\tnamed'))).to.match(/^[0-9a-f]{40}\t3\tnamed$/)
      const json = (await cli(['list', '--json'])).stdout.toString().trim().split('\n').map((l) => JSON.parse(l))
      expect(json.map((e) => e.size).sort()).to.deep.equal([3, 4])
      const shard = JSON.parse((await cli(['stat', '--json', key])).stdout).shard
      expect((await cli(['list', String(shard)])).stdout.toString()).to.contain(key)
      for (const bad of ['256', '-1', 'x', '1.5']) {
        const r = await cli(['list', bad])
        expect(r.code, bad).to.equal(2)
        expect(r.stderr).to.match(/^kfs: /)
      }
    })

    it('compact reports disk space before and after', async () => {
      // Removed by the library with reclaiming off: the space is still to be reclaimed.
      const store = kfs(c.db, { reclaim: false })
      const key = await store.put(bytes(3 * 1024 * 1024))
      await store.unlink(key)
      await store.close()
      const r = await cli(['compact'])
      expect(r.code).to.equal(0)
      const m = r.stdout.toString().match(/: ([\d.]+) MiB before, ([\d.]+ (?:B|KiB)) after\n$/)
      expect(m, r.stdout.toString()).to.not.equal(null)
    })

    it('unlink, and put --key over a file, give its disk space back before they exit', async () => {
      const MiB = 1024 * 1024
      const storeBytes = () => diskUsage(c.db)
      expect((await cli(['put', '--key', 'big', file('big', bytes(32 * MiB, 'a'))])).code).to.equal(0)
      const full = await storeBytes()
      expect(full).to.be.above(32 * MiB)
      // Replaced: the first version's 32 MiB come back, the second's stay.
      expect((await cli(['put', '--key', 'big', file('big', bytes(32 * MiB, 'b'))])).code).to.equal(0)
      expect(await storeBytes()).to.be.below(full + 8 * MiB)
      expect((await cli(['unlink', 'big'])).code).to.equal(0)
      expect(await storeBytes()).to.be.below(8 * MiB)
    })

    it('uses ~/.kfs/default when neither --db nor KFS_DB is given, and --db over KFS_DB', async () => {
      const home = path.join(t.dir, 'home')
      fs.mkdirSync(home)
      const r = await cli(['put'], { input: 'home', env: { KFS_DB: '', HOME: home } })
      expect(r.code).to.equal(0)
      expect(fs.existsSync(path.join(home, '.kfs', 'default', 'format.json'))).to.equal(true)
      const other = path.join(t.dir, 'other')
      await cli(['--db', other, 'put'], { input: 'x' })
      await cli(['put', '-d', other], { input: 'y' })
      expect(fs.existsSync(path.join(other, 'format.json'))).to.equal(true)
      expect(fs.existsSync(c.db)).to.equal(false)
    })
  })

  describe('verify and repair', () => {
    it('verify reports a sound store, repair recovers a shard that lost its MANIFEST', async () => {
      const keys = []
      for (let i = 0; i < 3; i++) keys.push((await cli(['put'], { input: bytes(200 * 1024, `v${i}`) })).stdout.toString().trim())
      const ok = await cli(['verify'])
      expect(ok).to.include({ code: 0, stderr: '' })
      expect(ok.stdout.toString()).to.equal('checked 3 files (600.0 KiB): no problems\n')
      expect(JSON.parse((await cli(['verify', '--json'])).stdout)).to.include({ files: 3 })
      await cli(['compact'])
      const shard = JSON.parse((await cli(['stat', '--json', keys[0]])).stdout).shard
      const dir = path.join(c.db, `${String(shard).padStart(3, '0')}.s`)
      for (const f of fs.readdirSync(dir).filter((f) => /^(MANIFEST|CURRENT)/.test(f))) fs.rmSync(path.join(dir, f))
      const bad = await cli(['verify'])
      expect(bad.code).to.equal(1)
      expect(bad.stdout.toString()).to.match(new RegExp(`^shard ${String(shard).padStart(3, '0')} \\(whole shard\\): .*kfs repair ${shard}`, 'm'))
      const got = await cli(['get', keys[0]])
      expect(got.code).to.equal(1)
      expect(got.stderr).to.match(/^kfs: shard \d{3} is corrupt/)
      const repaired = await cli(['repair', String(shard)])
      expect(repaired.code).to.equal(0)
      expect(repaired.stdout.toString()).to.match(/repaired: \d+ files? kept/)
      expect((await cli(['verify'])).code).to.equal(0)
      expect((await cli(['get', keys[0]])).stdout.equals(bytes(200 * 1024, 'v0'))).to.equal(true)
      expect((await cli(['repair', '300'])).code).to.equal(2)
    })
  })
})

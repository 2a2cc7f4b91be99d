'use strict'

const { expect } = require('chai')
const fs = require('node:fs')
const path = require('node:path')
const kfs = require('..')
const { bytes, scaled } = require('./helpers')
const { diskUsage } = require('../lib/dir/disk-usage')
const { useCli } = require('./cli-harness')
const { holder } = require('./share-harness')

// The rows of `kfs stat`'s summary: { name: value }.
const rowsOf = (stdout) => Object.fromEntries(stdout.toString().trim().split('\n').map((line) => line.split(/^(\S+) +/).slice(1)))

// The reclaimable row `kfs stat` prints where usage() counts reclaimable bytes (lib/store/local.js).
const reclaimableRow = (usage) => (typeof usage.reclaimable === 'number' ? { reclaimable: String(usage.reclaimable) } : {})

// The trash row `kfs stat` prints where usage() counts the trash.
const trashRow = (usage) => (usage.trash ? { trash: `${usage.trash.bytes} (${usage.trash.files} file${usage.trash.files === 1 ? '' : 's'})` } : {})

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
      const rows = rowsOf(summary.stdout)
      // The filesystem here has less than 8 TiB available: free is its room. disk: the
      // store's files, which each command's open changes a little (LevelDB's logs).
      expect(rows.free).to.match(new RegExp(`^\\d+ \\(available on the filesystem; ${8 * 1024 ** 4 - 7} by the store's capacity\\)$`))
      expect(rows.disk).to.match(/^\d+$/)
      expect(rows.holder).to.match(/^this command \(process \d+\): no other process held it$/)
      expect({ ...rows, free: 'F', disk: 'D', holder: 'H' }).to.deep.equal({
        used: '7', free: 'F', capacity: String(8 * 1024 ** 4), ...reclaimableRow(json), ...trashRow(json), files: '2', shards: `${json.shards.length} of 256 created`, disk: 'D', reserve: String(json.reserve), holder: 'H'
      })
      const human = rowsOf((await cli(['stat', '-H'])).stdout)
      expect(human).to.include({ used: '7 B', capacity: '8.0 TiB', files: '2', shards: '256 of 256 created', reserve: '16.0 MiB' })
      expect(human.free).to.match(/^[\d.]+ [KMGT]iB \(available on the filesystem; 8\.0 TiB by the store's capacity\)$/)
      expect(human.disk).to.match(/^[\d.]+ (B|KiB|MiB)$/)
      const shards = (await cli(['stat', '--shards', '--human'])).stdout.toString()
      expect(shards).to.match(/^shard +used +free +files +disk( +reclaimable)?( +trash)?$/m)
      expect(shards).to.match(/^total +7 B +8\.0 TiB +2 +capacity 8\.0 TiB( +[\d.]+ [KMG]?i?B)?( +[\d.]+ [KMG]?i?B \(\d+ files?\))?$/m)
      expect(shards).to.contain('32.0 GiB')
      expect(shards.trim().split('\n')).to.have.length(json.shards.length + 2)
      const withShards = JSON.parse((await cli(['stat', '--json', '--shards'])).stdout)
      expect({ ...withShards, disk: 0, diskFree: 0, heldBy: 0 }).to.deep.equal({ ...json, disk: 0, diskFree: 0, heldBy: 0 })
      expect(json).to.include({ heldHere: true, takenOver: false }) // the command held it itself
      expect(json.heldBy).to.be.a('number').and.not.equal(process.pid)
      expect(await cli(['stat', '--shards', 'somefile'])).to.include({ code: 2, stderr: 'kfs: --shards shows the store\'s shards: give no key\n' })
    })

    it('stat\'s free is the smaller of the store\'s room and what the filesystem has available, and says which', async () => {
      await cli(['put'], { input: 'one' })
      // The filesystem as if it had 3 blocks of 4 KiB left (statfs stubbed in the command).
      const stub = file('statfs-stub.js', `const fs = require('node:fs')
        const statfs = fs.promises.statfs
        fs.promises.statfs = async (...args) => ({ ...(await statfs(...args)), bavail: 3, bsize: 4096 })`)
      const env = { NODE_OPTIONS: `--require ${stub}` }
      expect(rowsOf((await cli(['stat'], { env })).stdout).free).to.equal(`12288 (available on the filesystem; ${8 * 1024 ** 4 - 3} by the store's capacity)`)
      expect(rowsOf((await cli(['stat', '-H'], { env })).stdout).free).to.equal('12.0 KiB (available on the filesystem; 8.0 TiB by the store\'s capacity)')
      expect(JSON.parse((await cli(['stat', '--json'], { env })).stdout)).to.include({ diskFree: 12288, free: 8 * 1024 ** 4 - 3 })
      // A store of 256 MiB on a filesystem with more: its own room.
      c.db = path.join(t.dir, 'small')
      const small = kfs(c.db, { maxTableSize: 256 * 1024 * 1024, create: true })
      await small.open()
      await small.close()
      const diskFree = JSON.parse((await cli(['stat', '--json'])).stdout).diskFree
      expect(diskFree).to.be.above(256 * 1024 * 1024)
      expect(rowsOf((await cli(['stat'])).stdout).free).to.match(new RegExp(`^${256 * 1024 * 1024} \\(by the store's capacity; \\d+ available on the filesystem\\)$`))
    })

    it('stat names the process holding the store: this command, another that answered, or none where read read-only', async () => {
      await cli(['put'], { input: 'one' })
      expect(rowsOf((await cli(['stat'])).stdout).holder).to.match(/^this command \(process \d+\): no other process held it$/)
      expect(rowsOf((await cli(['--read-only', 'stat'])).stdout).holder).to.equal('none: read by this command, read-only')
      const held = await holder(c.db)
      try {
        expect(rowsOf((await cli(['stat'])).stdout).holder).to.equal(`process ${held.child.pid}, which answered`)
        expect(JSON.parse((await cli(['stat', '--json'])).stdout)).to.include({ heldBy: held.child.pid, heldHere: false, takenOver: false })
      } finally {
        await held.stop()
      }
    })

    it('stat says once that its command took the store over from a holder that was killed', async () => {
      await cli(['put'], { input: 'one' })
      const held = await holder(c.db)
      await held.kill()
      const first = rowsOf((await cli(['stat'])).stdout).holder
      expect(first).to.match(/^this command \(process \d+\): the process that held it ended without closing it \(killed or crashed\), and this command took it over$/)
      expect(JSON.parse((await cli(['stat', '--json'])).stdout)).to.include({ heldHere: true, takenOver: false })
      expect(rowsOf((await cli(['stat'])).stdout).holder).to.match(/: no other process held it$/)
    })

    it('stat --shards counts a shard\'s log: a file just written to a holder\'s open shard is on disk', async () => {
      await cli(['put'], { input: 'one' })
      const held = await holder(c.db)
      try {
        await cli(['put'], { input: bytes(52736) }) // in the holder's memtable, and its log
        const usage = JSON.parse((await cli(['stat', '--json'])).stdout)
        const written = usage.shards.find((s) => s.used === 52736)
        expect(written.diskBytes).to.be.at.least(52736)
        const row = (await cli(['stat', '--shards'])).stdout.toString().split('\n').find((line) => line.startsWith(`${String(written.index).padStart(3, '0')} `))
        expect(Number(row.trim().split(/ +/)[4])).to.be.at.least(52736)
      } finally {
        await held.stop()
      }
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

'use strict'

// The tests of test/read-only.test.js that need root: a store opened read-only whose
// temporary directory is a full or read-only tmpfs, on a read-only bind mount, and as
// a user without write permission. Every mount is undone after the test, failed or not.
const { expect } = require('chai')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { spawnSync, execFileSync } = require('node:child_process')
const { useTmp, rejects, unmount, scaled } = require('../helpers')
const { FILES } = require('../fixtures/read-only-files')
const { tree, writeStore, readsEverything, cli, useShadows } = require('../fixtures/read-only-checks')

describe('a store opened read-only', function () {
  this.timeout(scaled(60000))
  const t = useTmp()
  const sh = useShadows(t) // sh.dir: os.tmpdir() while a test runs, where shadows go
  const { open, pause } = sh

  it('a full or read-only temporary directory fails the open with ENOSPC or EROFS naming it, and leaves nothing there', async function () {
    const dir = path.join(t.dir, 'store')
    await writeStore(dir)
    const tmp = path.join(t.dir, 'tmp')
    fs.mkdirSync(tmp)
    const mounted = spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=4k', 'tmpfs', tmp], { encoding: 'utf8' })
    if (mounted.status !== 0) {
      console.log(`      skipped: cannot mount a tmpfs here (root needed): ${mounted.stderr.trim()}`)
      return this.skip()
    }
    try {
      process.env.TMPDIR = tmp
      fs.writeFileSync(path.join(tmp, 'fill'), Buffer.alloc(4096))
      const full = await open(dir, { readOnly: true }).readFile(FILES[0][0]).catch((err) => err)
      expect(full.code).to.equal('ENOSPC')
      expect(full.message).to.contain(`(the temporary directory ${tmp}, where a database opened read-only is shadowed, is full)`)
      expect(fs.readdirSync(tmp)).to.deep.equal(['fill'])
      execFileSync('mount', ['-o', 'remount,ro', tmp])
      const readOnly = await open(dir, { readOnly: true }).readFile(FILES[0][0]).catch((err) => err)
      expect(readOnly.code).to.equal('EROFS')
      expect(readOnly.message).to.contain(`the shadow of ${path.join(dir, 'state')} in ${tmp} could not be made: EROFS: read-only file system`)
    } finally {
      unmount(tmp) // before useTmp removes t.dir, even after a failure
    }
  })

  // Needs root, for mount and for running kfs as another user.
  describe('that cannot be written', () => {
    let base, src, mnt
    before(function () {
      const skip = (why) => {
        console.log(`      skipped: ${why}`)
        this.skip()
      }
      if (typeof process.getuid !== 'function' || process.getuid() !== 0) return skip('not running as root (mount needs it)')
      base = fs.mkdtempSync(path.join(os.tmpdir(), 'kfs-ro-'))
      fs.chmodSync(base, 0o755) // for the test that runs kfs as another user
      src = path.join(base, 'src')
      mnt = path.join(base, 'mnt')
      fs.mkdirSync(src)
      fs.mkdirSync(mnt)
      try {
        execFileSync('mount', ['--bind', src, mnt], { stdio: 'pipe' })
      } catch (err) {
        fs.rmSync(base, { recursive: true, force: true })
        return skip(`cannot bind-mount here: ${String(err.stderr || err.message).trim()}`)
      }
      try {
        execFileSync('mount', ['-o', 'remount,bind,ro', mnt], { stdio: 'pipe' })
      } catch (err) {
        if (unmount(mnt)) fs.rmSync(base, { recursive: true, force: true })
        return skip(`cannot remount a bind mount read-only here: ${String(err.stderr || err.message).trim()}`)
      }
    })
    beforeEach(async () => {
      await writeStore(path.join(src, 'store'))
    })
    // Inner hooks run before useTmp's, which closes the stores a test opened: close them
    // here first, or a LevelDB still open writes into the directory being removed.
    afterEach(async () => {
      await Promise.allSettled(t.stores.splice(0).map((s) => s.close()))
      fs.rmSync(path.join(src, 'store'), { recursive: true, force: true })
    })
    after(() => {
      if (!base) return
      // Retried while busy, then lazily: a store a failed test left open must not leave
      // the mount behind. Never removes through a mount still there.
      if (unmount(mnt)) fs.rmSync(base, { recursive: true, force: true })
    })

    it('on a read-only mount: opens read-only and reads it; read-write fails with EROFS saying to use readOnly', async () => {
      const dir = path.join(mnt, 'store')
      const before = tree(path.join(src, 'store'))
      await pause()
      const store = open(dir, { readOnly: true })
      await readsEverything(store)
      await store.close()
      expect(tree(path.join(src, 'store'))).to.deep.equal(before)
      expect(fs.readdirSync(sh.dir)).to.deep.equal([])
      const err = await rejects(open(dir).open(), 'EROFS')
      expect(err.message).to.match(new RegExp(`^the store at ${dir} could not be opened: .*; a store that cannot be written opens for reads with the option readOnly: true$`))
      expect(err.path).to.equal(dir)
    })

    it('on a read-only mount: EBUSY while a process has the store open read-write through another path (share: false)', async () => {
      await open(path.join(src, 'store'), { share: false }).open()
      await rejects(open(path.join(mnt, 'store'), { readOnly: true }).open(), 'EBUSY')
    })

    it('on a read-only mount: kfs get, exists, stat, list and verify read it; put, unlink and compact fail with EROFS, exit 1', () => {
      const dir = path.join(mnt, 'store')
      const [key, data] = FILES[5]
      expect(cli(dir, ['get', key]).stdout).to.deep.equal(data)
      expect(cli(dir, ['exists', key]).stdout.toString()).to.equal('true\n')
      const stat = cli(dir, ['stat', key, '--json'])
      expect(stat.code, stat.stderr).to.equal(0)
      expect(JSON.parse(stat.stdout).size).to.equal(data.length)
      const list = cli(dir, ['list'])
      expect(list.code, list.stderr).to.equal(0)
      expect(list.stdout.toString().trim().split('\n')).to.have.length(FILES.length)
      expect(cli(dir, ['verify']).code).to.equal(0)
      for (const args of [['put'], ['unlink', key], ['compact']]) {
        const r = cli(dir, args, { input: Buffer.from('new data') })
        expect(r.code).to.equal(1)
        expect(r.stderr).to.equal(`kfs: the store at ${dir} cannot be written (read-only file system): kfs ${args[0]} would change it; get, exists, stat, list and verify read it\n`)
      }
      expect(fs.readdirSync(sh.dir)).to.deep.equal([])
    })

    it('without write permission: kfs reads it as another user, and put fails with EROFS, exit 1', () => {
      const dir = path.join(src, 'store') // writable by root only
      fs.chmodSync(sh.dir, 0o777)
      const as = { uid: 65534, gid: 65534 }
      const [key, data] = FILES[5]
      const get = cli(dir, ['get', key], as)
      expect(get.code, get.stderr).to.equal(0)
      expect(get.stdout).to.deep.equal(data)
      expect(cli(dir, ['list'], as).stdout.toString().trim().split('\n')).to.have.length(FILES.length)
      const put = cli(dir, ['put'], { ...as, input: Buffer.from('new data') })
      expect(put.code).to.equal(1)
      expect(put.stderr).to.equal(`kfs: the store at ${dir} cannot be written (permission denied: it belongs to user 0): kfs put would change it; get, exists, stat, list and verify read it\n`)
      // The library, opened read-write by that user: EACCES saying whose the store is and
      // to use readOnly (test/system/permissions-root.test.js).
      const script = `require(${JSON.stringify(path.join(__dirname, '..', '..'))})(process.argv[1]).open().catch((err) => console.log(err.code, err.message))`
      const lib = spawnSync(process.execPath, ['-e', script, dir], { ...as, encoding: 'utf8' })
      expect(lib.stdout).to.equal(`EACCES the store at ${dir} belongs to user 0, and this process (user 65534) cannot write it: open it as that user, or open it for reads with the option readOnly: true\n`)
      expect(fs.readdirSync(sh.dir)).to.deep.equal([])
    })
  })
})

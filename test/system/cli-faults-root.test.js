'use strict'

// The tests of test/cli-faults.test.js that need root (mknod, chown, runuser) or strace.
const { expect } = require('chai')
const fs = require('node:fs')
const path = require('node:path')
const { spawnSync } = require('node:child_process')
const { bytes, scaled } = require('../helpers')
const { useCli, BIN } = require('../cli-harness')
const hasStrace = spawnSync('strace', ['-V']).status === 0

describe('kfs command line under faults', function () {
  this.timeout(scaled(60000))
  const c = useCli()
  const { t, cli } = c

  describe('get FILE where FILE is not a plain file', () => {
    const data = bytes(300 * 1024, 'target')
    beforeEach(async () => {
      await cli(['put', '--key', 'k'], { input: data })
    })

    // A device node of its own rather than the system's /dev/null, which a failure
    // would replace for every process on the machine.
    it('a character device (/dev/null) is written through and stays a device', async function () {
      const nul = path.join(t.dir, 'null')
      const made = spawnSync('mknod', [nul, 'c', '1', '3']) // what /dev/null is
      if (made.status !== 0) {
        console.log('      skipped: mknod needs root')
        return this.skip()
      }
      const r = await cli(['get', 'k', nul])
      expect(r).to.deep.include({ code: 0, stderr: '' })
      const after = fs.lstatSync(nul)
      expect(after.isCharacterDevice()).to.equal(true)
      expect(after.rdev).to.equal(fs.statSync('/dev/null').rdev)
      expect(fs.readdirSync(t.dir).filter((f) => f.includes('.kfs-'))).to.deep.equal([])
    })

    it('a regular file keeps its owner, group and mode bits, setgid included (as root)', async function () {
      if (process.geteuid() !== 0) {
        console.log('      skipped: giving a file to another user needs root')
        return this.skip()
      }
      const owned = path.join(t.dir, 'owned')
      fs.writeFileSync(owned, 'previous', { mode: 0o600 })
      fs.chownSync(owned, 65534, 65534)
      const setgid = path.join(t.dir, 'setgid')
      fs.writeFileSync(setgid, 'previous')
      fs.chmodSync(setgid, 0o2755)
      for (const file of [owned, setgid]) expect((await cli(['get', 'k', file])).code).to.equal(0)
      expect(fs.readFileSync(owned).equals(data)).to.equal(true)
      expect(fs.statSync(owned)).to.deep.include({ uid: 65534, gid: 65534 })
      expect(fs.statSync(owned).mode & 0o7777).to.equal(0o600)
      expect(fs.statSync(setgid).mode & 0o7777).to.equal(0o2755)
    })

    it('a file others may not read is written into a temporary file they may not read either', async function () {
      if (!hasStrace) {
        console.log('      skipped: strace is not installed (Debian package strace)')
        return this.skip()
      }
      const out = path.join(t.dir, 'secret')
      fs.writeFileSync(out, 'previous', { mode: 0o600 })
      const trace = path.join(t.dir, 'trace')
      const r = spawnSync('strace', ['-f', '-qq', '-o', trace, '-e', 'trace=open,openat,chmod,fchmod,fchmodat', process.execPath, BIN, '-d', c.db, 'get', 'k', out])
      expect(r.status).to.equal(0)
      const lines = fs.readFileSync(trace, 'utf8').split('\n')
      const created = lines.filter((l) => /open(at)?\(.*\.secret\.kfs-[0-9a-f]+".*O_CREAT/.test(l))
      expect(created, lines.join('\n')).to.have.length(1)
      expect(created[0]).to.match(/, 0600\)\s+= \d+$/)
      // The store's socket, served while the command holds the store, aside.
      const modes = lines.filter((l) => /chmod/.test(l) && !/kfs\.sock/.test(l)).map((l) => /, (0\d+)\)\s+= 0$/.exec(l)[1])
      expect(modes).to.deep.equal(['0600'])
      expect(fs.statSync(out).mode & 0o777).to.equal(0o600)
    })

    it('a file in a directory the user cannot write: the message says why it cannot be replaced', async function () {
      if (process.geteuid() !== 0 || spawnSync('runuser', ['-u', 'nobody', '--', 'true']).status !== 0) {
        console.log('      skipped: needs root and runuser, to run kfs as nobody')
        return this.skip()
      }
      fs.chmodSync(t.dir, 0o755) // nobody reads the store, opened read-only
      const rodir = path.join(t.dir, 'rodir')
      fs.mkdirSync(rodir)
      const file = path.join(rodir, 't')
      fs.writeFileSync(file, 'previous', { mode: 0o666 })
      fs.chmodSync(file, 0o666)
      fs.chmodSync(rodir, 0o555)
      const r = spawnSync('runuser', ['-u', 'nobody', '--', process.execPath, BIN, '-d', c.db, 'get', 'k', file], { encoding: 'utf8' })
      expect(r.status).to.equal(1)
      expect(r.stderr).to.equal(`kfs: cannot create a temporary file in ${rodir} to replace ${file} atomically (permission denied)\n`)
      expect(fs.readFileSync(file, 'utf8')).to.equal('previous')
    })
  })

  it('get FILE syncs the file before renaming it into place, and its directory after', async function () {
    if (!hasStrace) {
      console.log('      skipped: strace is not installed (Debian package strace)')
      return this.skip()
    }
    await cli(['put', '--key', 'k'], { input: 'durable' })
    const target = path.join(t.dir, 'out')
    const trace = path.join(t.dir, 'trace')
    const r = spawnSync('strace', ['-f', '-y', '-qq', '-o', trace, '-e', 'trace=fsync,fdatasync,rename,renameat,renameat2', process.execPath, BIN, '-d', c.db, 'get', 'k', target])
    expect(r.status).to.equal(0)
    const lines = fs.readFileSync(trace, 'utf8').split('\n')
    const renamed = lines.findIndex((l) => /rename\w*\(.*\.out\.kfs-[0-9a-f]+".*"[^"]*\/out"/.test(l))
    expect(renamed, lines.join('\n')).to.be.above(-1)
    expect(lines.slice(0, renamed).some((l) => /f(data)?sync\(\d+<[^>]*\.out\.kfs-[0-9a-f]+>/.test(l)), 'temporary file synced before the rename').to.equal(true)
    expect(lines.slice(renamed).some((l) => new RegExp(`fsync\\(\\d+<${t.dir}>`).test(l)), 'directory synced after the rename').to.equal(true)
    expect(fs.readFileSync(target, 'utf8')).to.equal('durable')
  })
})

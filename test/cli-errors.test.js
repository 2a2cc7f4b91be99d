'use strict'

const { expect } = require('chai')
const fs = require('node:fs')
const path = require('node:path')
const { spawn } = require('node:child_process')
const kfs = require('..')
const { bytes, damageChunk, scaled } = require('./helpers')
const { useCli, BIN } = require('./cli-harness')

// The command line as a process: errors, exit codes, help and version.
describe('kfs command line', function () {
  this.timeout(scaled(60000))
  const c = useCli()
  const { t, cli, file } = c

  describe('errors', () => {
    it('a missing key: one line on stderr, exit 1, no stack trace', async () => {
      await cli(['put'], { input: 'something' })
      const r = await cli(['get', 'ab'.repeat(20)])
      expect(r).to.include({ code: 1, stderr: `kfs: no file with key ${'ab'.repeat(20)}\n` })
      expect(r.stdout.length).to.equal(0)
      expect((await cli(['unlink', 'nope'])).stderr).to.match(/^kfs: no file named "nope" \(key [0-9a-f]{40}\)\n$/)
      expect((await cli(['stat', 'nope'])).code).to.equal(1)
    })

    it('KFS_DEBUG=1 adds the stack trace', async () => {
      await cli(['put'], { input: 'something' })
      const r = await cli(['get', 'nope'], { env: { KFS_DEBUG: '1' } })
      expect(r.code).to.equal(1)
      expect(r.stderr).to.match(/^kfs: no file named "nope"/).and.to.contain('    at ')
    })

    it('usage errors exit 2', async () => {
      for (const args of [['bogus'], ['get'], ['put', '--nope'], ['get', 'k', '--start', 'x'], ['get', 'k', '--end', '-3'], [], ['put', '--key', '']]) {
        const r = await cli(args)
        expect(r.code, args.join(' ')).to.equal(2)
        expect(r.stderr, args.join(' ')).to.match(/^kfs: |^Usage: kfs/)
      }
    })

    it('an argument that is not UTF-8 is refused, exit 2, before anything is stored: read by Node, it would be another name', async () => {
      // A shell makes the bytes: Node passes a child's arguments as UTF-8 only.
      const run = (key, ...more) => new Promise((resolve, reject) => {
        const child = spawn('sh', ['-c', `printf x | exec "$0" "$1" ${more.join(' ')} put --key "$(printf '${key}')"`, process.execPath, BIN], { env: { ...process.env, KFS_DB: c.db, KFS_DEBUG: '' } })
        let stdout = ''
        let stderr = ''
        child.stdout.on('data', (d) => (stdout += d))
        child.stderr.on('data', (d) => (stderr += d))
        child.on('error', reject)
        child.on('close', (code) => resolve({ code, stdout, stderr }))
      })
      for (const key of ['\\377x', '\\355\\240\\200x']) {
        const r = await run(key)
        expect(r.code, key).to.equal(2)
        expect(r.stderr, key).to.match(/^kfs: argument 3 \("\ufffd+x"\) is not valid UTF-8: .*give names and paths in UTF-8\n$/)
        expect(fs.existsSync(c.db), key).to.equal(false)
      }
      const json = await run('\\377x', '--json')
      expect(JSON.parse(json.stderr).error.code).to.equal('EINVAL')
      // U+FFFD written as UTF-8 is a name like any other.
      const ok = await run('\\357\\277\\275x')
      expect(ok.code, ok.stderr).to.equal(0)
      expect((await cli(['stat', '\ufffdx'])).stdout.toString()).to.contain(ok.stdout.trim())
    })

    it('a missing input file is a runtime error naming it', async () => {
      const r = await cli(['put', path.join(t.dir, 'absent.bin')])
      expect(r.code).to.equal(1)
      expect(r.stderr).to.equal(`kfs: ${path.join(t.dir, 'absent.bin')}: no such file or directory\n`)
    })

    it('a store in use by another process that does not share it', async () => {
      const store = kfs(c.db, { share: false })
      await store.open()
      try {
        const r = await cli(['put'], { input: 'x' })
        expect(r.code).to.equal(1)
        expect(r.stderr).to.equal(`kfs: the store at ${c.db} is in use by process ${process.pid}, which does not share it (it was opened with share: false, or by an older kfs): stop it, or open the store there with share: true\n`)
      } finally {
        await store.close()
      }
    })

    it('a full shard', async () => {
      const store = kfs(c.db, { maxTableSize: 256 * 1024 })
      await store.open()
      await store.close()
      const r = await cli(['put'], { input: bytes(2000) })
      expect(r.code).to.equal(1)
      expect(r.stderr).to.match(/^kfs: a file of 2000 bytes or more cannot be stored: a shard holds at most 1024\n$/)
      const r2 = await cli(['put', file('big', bytes(2000))])
      expect(r2.stderr).to.match(/^kfs: shard \d{3} is full: the file is 2000 bytes, and the shard had 1024 bytes free when its write began\n$/)
    })

    it('get to a file never leaves a truncated file behind', async () => {
      const data = bytes(5 * 128 * 1024, 'damaged')
      const key = (await cli(['put'], { input: data })).stdout.toString().trim()
      await damageChunk(t.dir, 4)
      const out = path.join(t.dir, 'out.bin')
      const r = await cli(['get', key, out])
      expect(r.code).to.equal(1)
      expect(r.stderr).to.match(/^kfs: file [0-9a-f]{64} is damaged/)
      expect(fs.existsSync(out)).to.equal(false)
      fs.writeFileSync(out, 'previous')
      await cli(['get', key, out])
      expect(fs.readFileSync(out, 'utf8')).to.equal('previous')
      expect(fs.readdirSync(t.dir).filter((f) => f.includes('.kfs-'))).to.deep.equal([])
    })

    it('a reader closing the pipe early ends kfs cleanly', async () => {
      const key = (await cli(['put'], { input: bytes(4 * 1024 * 1024) })).stdout.toString().trim()
      const r = await new Promise((resolve) => {
        const sh = spawn('bash', ['-c', `node "${BIN}" get ${key} | head -c 10 > /dev/null; echo "\${PIPESTATUS[0]}"`], { env: { ...process.env, KFS_DB: c.db } })
        let stdout = ''
        let stderr = ''
        sh.stdout.on('data', (d) => (stdout += d))
        sh.stderr.on('data', (d) => (stderr += d))
        sh.on('close', () => resolve({ stdout, stderr }))
      })
      expect(r).to.deep.equal({ stdout: '0\n', stderr: '' })
    })
  })

  describe('help and version', () => {
    it('--version prints the package version', async () => {
      const r = await cli(['--version'])
      expect(r.code).to.equal(0)
      expect(r.stdout.toString()).to.equal(require('../package.json').version + '\n')
    })

    it('--help, -h and `kfs help` document every command, and exit 0', async () => {
      const top = await cli(['--help'])
      expect(top).to.include({ code: 0, stderr: '' })
      for (const word of ['put|write', 'get|read', 'unlink', 'exists', 'stat', 'trash <key>', 'restore-trash', 'empty-trash', 'list', 'compact', 'verify', 'repair', 'help [command]', '-d, --db <dir>', 'KFS_DB', '--version', '-h, --help']) expect(top.stdout.toString()).to.contain(word)
      for (const args of [['-h'], ['help']]) expect(await cli(args), args.join(' ')).to.deep.include({ code: 0, stdout: top.stdout, stderr: '' })
    })

    it('each command documents its options and the global -d, --db, with -h, --help and `kfs help <command>`', async () => {
      const expected = { put: ['--key', '--size', '--expires <when>'], get: ['--start', '--end'], stat: ['-H, --human', '--shards', '--json'], list: ['--json'], unlink: [], exists: [], trash: [], 'restore-trash': ['--json'], 'empty-trash': ['--before <when>', '--json'], compact: [], verify: ['--shard', '--json'], repair: ['--json'] }
      for (const [command, options] of Object.entries(expected)) {
        const r = await cli([command, '-h'])
        expect(r, command).to.include({ code: 0, stderr: '' })
        const help = r.stdout.toString()
        expect(help, command).to.match(new RegExp(`^Usage: kfs ${command}`))
        for (const option of [...options, '-h, --help', '-d, --db <dir>', 'KFS_DB']) expect(help, command).to.contain(option)
        expect((await cli([command, '--help'])).stdout.toString(), command).to.equal(help)
        expect(await cli(['help', command]), command).to.deep.include({ code: 0, stdout: r.stdout, stderr: '' })
      }
    })

    it('main() writes a command\'s help and usage errors to the streams it is given', async () => {
      const { main } = require('../lib/cli/program')
      const sink = () => ({ text: '', write (s) { this.text += s; return true } })
      const io = { stdin: undefined, stdout: sink(), stderr: sink() }
      expect(await main(['node', 'kfs', 'put', '-h'], io, {})).to.equal(0)
      expect(io.stdout.text).to.match(/^Usage: kfs put/)
      expect(await main(['node', 'kfs', 'put', '--ky'], io, {})).to.equal(2)
      expect(io.stderr.text).to.equal("kfs: unknown option '--ky' (did you mean --key?); see 'kfs put --help'\n")
    })

    it('an unknown command or option is one kfs: line naming the nearest one and the help, exit 2', async () => {
      const expected = [
        [['pt'], "kfs: unknown command 'pt' (did you mean put?); see 'kfs --help'"],
        [['bogus'], "kfs: unknown command 'bogus'; see 'kfs --help'"],
        [['help', 'verfy'], "kfs: unknown command 'verfy' (did you mean verify?); see 'kfs --help'"],
        [['put', '--ky', 'x'], "kfs: unknown option '--ky' (did you mean --key?); see 'kfs put --help'"],
        [['stat', '--hman'], "kfs: unknown option '--hman' (did you mean --human?); see 'kfs stat --help'"],
        [['get'], "kfs: missing required argument 'key'; see 'kfs get --help'"]
      ]
      for (const [args, line] of expected) expect(await cli(args), args.join(' ')).to.deep.include({ code: 2, stdout: Buffer.alloc(0), stderr: line + '\n' })
    })
  })
})

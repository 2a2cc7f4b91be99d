'use strict'

const { expect } = require('chai')
const fs = require('node:fs')
const path = require('node:path')
const { spawn } = require('node:child_process')
const kfs = require('..')
const { useTmp, bytes, sha256, damageChunk, scaled } = require('./helpers')
const { diskUsage } = require('../lib/dir/disk-usage')

const BIN = path.join(__dirname, '..', 'bin', 'kfs.js')

describe('kfs command line', function () {
  this.timeout(scaled(60000))
  const t = useTmp()
  let db

  beforeEach(() => {
    db = path.join(t.dir, 'db')
  })

  // Runs `kfs args...` with KFS_DB set to the test's store; resolves to
  // { code, stdout (Buffer), stderr (string) }.
  function cli (args, { input, env = {} } = {}) {
    return new Promise((resolve, reject) => {
      const child = spawn(process.execPath, [BIN, ...args], { env: { ...process.env, KFS_DB: db, KFS_DEBUG: '', ...env } })
      const out = []
      let stderr = ''
      child.stdout.on('data', (d) => out.push(d))
      child.stderr.on('data', (d) => (stderr += d))
      child.on('error', reject)
      child.on('close', (code) => resolve({ code, stdout: Buffer.concat(out), stderr }))
      child.stdin.on('error', () => {})
      child.stdin.end(input)
    })
  }

  const file = (name, data) => {
    const p = path.join(t.dir, name)
    fs.writeFileSync(p, data)
    return p
  }

  describe('put and get', () => {
    for (const [label, size] of [['empty', 0], ['small', 100], ['multi-chunk', 3 * 128 * 1024 + 17]]) {
      it(`round-trips a ${label} file through files and through stdin/stdout`, async () => {
        const data = bytes(size, label)
        const put = await cli(['put', file('in', data)])
        expect(put).to.include({ code: 0, stderr: '' })
        const key = put.stdout.toString()
        expect(key).to.equal(sha256(data) + '\n')
        const out = path.join(t.dir, 'out')
        expect((await cli(['get', key.trim(), out])).code).to.equal(0)
        expect(fs.readFileSync(out).equals(data)).to.equal(true)

        const empty = size ? [] : ['--allow-empty'] // refused otherwise
        const viaStdin = await cli(['put', ...empty], { input: data })
        expect(viaStdin.stdout.toString()).to.equal(key)
        const dash = await cli(['put', '-', ...empty], { input: data })
        expect(dash.stdout.toString()).to.equal(key)
        const toStdout = await cli(['get', key.trim()])
        expect(toStdout.code).to.equal(0)
        expect(toStdout.stdout.equals(data)).to.equal(true)
      })
    }

    it('stores under --key, a hex key or a name, and prints the key', async () => {
      const named = await cli(['put', '--key', 'photo.jpg', file('a', 'pixels')])
      expect(named.stdout.toString().trim()).to.match(/^[0-9a-f]{40}$/)
      expect((await cli(['get', 'photo.jpg'])).stdout.toString()).to.equal('pixels')
      expect((await cli(['get', named.stdout.toString().trim()])).stdout.toString()).to.equal('pixels')
      const hex = 'AB'.repeat(32)
      const put = await cli(['put', '--key', hex], { input: 'from stdin' })
      expect(put.stdout.toString()).to.equal(hex.toLowerCase() + '\n')
      expect((await cli(['get', hex])).stdout.toString()).to.equal('from stdin')
    })

    it('reads byte ranges with --start and --end', async () => {
      const data = bytes(300 * 1024, 'range')
      const key = (await cli(['put'], { input: data })).stdout.toString().trim()
      const range = async (...args) => (await cli(['get', key, ...args])).stdout
      expect((await range('--start', '10', '--end', '19')).equals(data.subarray(10, 20))).to.equal(true)
      expect((await range('--start', String(200 * 1024))).equals(data.subarray(200 * 1024))).to.equal(true)
      expect((await range('--end', '0')).equals(data.subarray(0, 1))).to.equal(true)
      // Past the end means to the end, 2^53 and beyond included.
      for (const end of [String(data.length), '9007199254740991', '9007199254740992', '99999999999999999999999']) {
        expect((await range('--start', '10', '--end', end)).equals(data.subarray(10)), end).to.equal(true)
      }
      const reversed = await cli(['get', key, '--start', '5', '--end', '4'])
      expect(reversed.code).to.equal(2)
      expect(reversed.stderr).to.match(/^kfs: end \(4\) must not be less than start \(5\)\n$/)
    })

    it('put of a character device without --size is a usage error, at once, and creates nothing', async () => {
      const store = kfs(db, { maxTableSize: 256 * 1024 }) // shards of 1 KiB: before the fix, the put fails fast
      await store.open()
      await store.close()
      const line = 'kfs: /dev/zero is a character device, which may never end: give --size <bytes> to store that many bytes of it\n'
      for (const args of [['put', '/dev/zero'], ['put', '--key', 'zeros', '/dev/zero']]) {
        expect(await cli(args), args.join(' ')).to.deep.include({ code: 2, stdout: Buffer.alloc(0), stderr: line })
      }
      expect(fs.readdirSync(path.join(db, 'tmp'))).to.deep.equal([])
      db = path.join(t.dir, 'none')
      expect(await cli(['put', '/dev/zero'])).to.include({ code: 2, stderr: line })
      expect(fs.existsSync(db)).to.equal(false)
    })

    it('put --size stores exactly the first bytes of a device, a file or standard input', async () => {
      const zeros = Buffer.alloc(300 * 1024)
      const put = await cli(['put', '--size', String(zeros.length), '/dev/zero'])
      expect(put).to.deep.include({ code: 0, stdout: Buffer.from(sha256(zeros) + '\n'), stderr: '' })
      expect((await cli(['get', sha256(zeros)])).stdout.equals(zeros)).to.equal(true)
      expect((await cli(['put', '--size', '1000', '--key', 'zeros', '/dev/zero'])).code).to.equal(0)
      expect((await cli(['get', 'zeros'])).stdout.equals(Buffer.alloc(1000))).to.equal(true)
      const hello = file('hello', 'hello')
      expect((await cli(['put', '--size', '3', hello])).stdout.toString()).to.equal(sha256(Buffer.from('hel')) + '\n')
      expect((await cli(['put', '--size', '4', '--key', 'hell'], { input: 'hello' })).code).to.equal(0)
      expect((await cli(['get', 'hell'])).stdout.toString()).to.equal('hell')
      expect((await cli(['put', '--size', '0', '/dev/zero'])).stdout.toString()).to.equal(sha256(Buffer.alloc(0)) + '\n')
    })

    it('put --size: input that ends sooner stores nothing; a size too large for a shard fails at once', async () => {
      const hello = file('hello', 'hello')
      for (const [args, input, name] of [[['put', '--size', '6', hello], undefined, hello], [['put', '--size', '6'], 'hello', 'standard input'], [['put', '--size', '6', '--key', 'k'], 'hello', 'standard input']]) {
        expect(await cli(args, { input }), args.join(' ')).to.include({ code: 1, stderr: `kfs: ${name} ended after 5 bytes, fewer than --size (6); nothing was stored\n` })
      }
      expect((await cli(['list'])).stdout.toString()).to.equal('')
      expect((await cli(['put', '--size', '-1', hello])).code).to.equal(2)
      const started = Date.now()
      const big = await cli(['put', '--size', String(64 * 1024 ** 3), '/dev/zero'])
      expect(big).to.include({ code: 1, stderr: 'kfs: a file of 68719476736 bytes cannot be stored: a shard holds at most 34359738368\n' })
      expect(Date.now() - started).to.be.below(scaled(10000)) // reading 64 GiB of /dev/zero would take minutes
    })

    it('write and read are aliases of put and get', async () => {
      const key = (await cli(['write'], { input: 'alias' })).stdout.toString().trim()
      expect((await cli(['read', key])).stdout.toString()).to.equal('alias')
    })

    it('does not write content already stored again', async () => {
      const data = bytes(1000)
      await cli(['put', file('a', data)])
      const store = kfs(db)
      const before = await store.stat(sha256(data))
      await store.close()
      await cli(['put', file('a', data)])
      const again = kfs(db)
      expect((await again.stat(sha256(data))).mtime).to.deep.equal(before.mtime)
      await again.close()
    })
  })

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
      await cli(['put'], { input: 'one' })
      await cli(['put'], { input: 'two!' })
      const json = JSON.parse((await cli(['stat', '--json'])).stdout)
      expect(json).to.include({ used: 7, files: 2 })
      expect(json.shards.length).to.be.within(1, 2)
      expect(json.reserve).to.equal(16 * 1024 * 1024) // the disk reserve's default
      const summary = await cli(['stat'])
      expect(summary).to.include({ code: 0, stderr: '' })
      // disk: the store's files, which each command's open changes a little (LevelDB's logs).
      const rows = summary.stdout.toString().replace(/^disk +\d+$/m, 'disk      N')
      expect(rows).to.equal([['used', 7], ['free', 8 * 1024 ** 4 - 7], ['capacity', 8 * 1024 ** 4], ['files', 2],
        ['shards', `${json.shards.length} of 256 created`], ['disk', 'N'], ['reserve', json.reserve]].map(([name, value]) => `${name.padEnd(8)}  ${value}\n`).join(''))
      const human = (await cli(['stat', '-H'])).stdout.toString()
      expect(human).to.match(/^used +7 B\nfree +8\.0 TiB\ncapacity +8\.0 TiB\nfiles +2\nshards +[12] of 256 created\ndisk +[\d.]+ (B|KiB)\nreserve +16\.0 MiB\n$/)
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
      const store = kfs(db, { reclaim: false })
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
      const storeBytes = () => diskUsage(db)
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
      expect(fs.existsSync(db)).to.equal(false)
    })
  })

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

    it('a missing input file is a runtime error naming it', async () => {
      const r = await cli(['put', path.join(t.dir, 'absent.bin')])
      expect(r.code).to.equal(1)
      expect(r.stderr).to.equal(`kfs: ${path.join(t.dir, 'absent.bin')}: no such file or directory\n`)
    })

    it('a store in use by another process that does not share it', async () => {
      const store = kfs(db, { share: false })
      await store.open()
      try {
        const r = await cli(['put'], { input: 'x' })
        expect(r.code).to.equal(1)
        expect(r.stderr).to.equal(`kfs: the store at ${db} is in use by process ${process.pid}, which does not share it (it was opened with share: false, or by an older kfs, or does not answer): stop it, or open the store there with share: true\n`)
      } finally {
        await store.close()
      }
    })

    it('a full shard', async () => {
      const store = kfs(db, { maxTableSize: 256 * 1024 })
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
        const sh = spawn('bash', ['-c', `node "${BIN}" get ${key} | head -c 10 > /dev/null; echo "\${PIPESTATUS[0]}"`], { env: { ...process.env, KFS_DB: db } })
        let stdout = ''
        let stderr = ''
        sh.stdout.on('data', (d) => (stdout += d))
        sh.stderr.on('data', (d) => (stderr += d))
        sh.on('close', () => resolve({ stdout, stderr }))
      })
      expect(r).to.deep.equal({ stdout: '0\n', stderr: '' })
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
      const dir = path.join(db, `${String(shard).padStart(3, '0')}.s`)
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

  describe('help and version', () => {
    it('--version prints the package version', async () => {
      const r = await cli(['--version'])
      expect(r.code).to.equal(0)
      expect(r.stdout.toString()).to.equal(require('../package.json').version + '\n')
    })

    it('--help, -h and `kfs help` document every command, and exit 0', async () => {
      const top = await cli(['--help'])
      expect(top).to.include({ code: 0, stderr: '' })
      for (const word of ['put|write', 'get|read', 'unlink', 'exists', 'stat', 'list', 'compact', 'verify', 'repair', 'help [command]', '-d, --db <dir>', 'KFS_DB', '--version', '-h, --help']) expect(top.stdout.toString()).to.contain(word)
      for (const args of [['-h'], ['help']]) expect(await cli(args), args.join(' ')).to.deep.include({ code: 0, stdout: top.stdout, stderr: '' })
    })

    it('each command documents its options and the global -d, --db, with -h, --help and `kfs help <command>`', async () => {
      const expected = { put: ['--key', '--size'], get: ['--start', '--end'], stat: ['-H, --human', '--shards', '--json'], list: ['--json'], unlink: [], exists: [], compact: [], verify: ['--shard', '--json'], repair: ['--json'] }
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

  it('uses the library through its public face only: lib/cli/ and bin/ require nothing else under lib/', () => {
    const root = path.join(__dirname, '..')
    const sources = ['lib/cli', 'bin'].flatMap((dir) => fs.readdirSync(path.join(root, dir)).filter((f) => f.endsWith('.js')).map((f) => path.join(root, dir, f)))
    expect(sources.length).to.be.above(6)
    const allowed = (file) => file === path.join(root, 'index.js') || file === path.join(root, 'package.json') || path.dirname(file) === path.join(root, 'lib', 'cli')
    const used = []
    for (const source of sources) {
      for (const [, name] of fs.readFileSync(source, 'utf8').matchAll(/require\(\s*['"`]([^'"`]+)['"`]\s*\)/g)) {
        if (!name.startsWith('.')) continue // node: and packages
        const file = require.resolve(path.resolve(path.dirname(source), name))
        used.push(file)
        expect(allowed(file), `${path.relative(root, source)} requires ${name}`).to.equal(true)
      }
    }
    expect(used).to.include(path.join(root, 'index.js'))
  })

  it('shows no progress bar when stderr is not a terminal', async () => {
    const r = await cli(['put', file('big', bytes(8 * 1024 * 1024))])
    expect(r).to.include({ code: 0, stderr: '' })
    expect((await cli(['get', r.stdout.toString().trim(), path.join(t.dir, 'o')])).stderr).to.equal('')
  })
})

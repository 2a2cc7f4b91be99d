'use strict'

const { expect } = require('chai')
const fs = require('node:fs')
const path = require('node:path')
const kfs = require('..')
const { bytes, sha256, scaled } = require('./helpers')
const { useCli } = require('./cli-harness')

// The command line as a process: put and get, and what the CLI may use of the library.
describe('kfs command line', function () {
  this.timeout(scaled(60000))
  const c = useCli()
  const { t, cli, file } = c

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
      const store = kfs(c.db, { maxTableSize: 256 * 1024 }) // shards of 1 KiB: before the fix, the put fails fast
      await store.open()
      await store.close()
      const line = 'kfs: /dev/zero is a character device, which may never end: give --size <bytes> to store that many bytes of it\n'
      for (const args of [['put', '/dev/zero'], ['put', '--key', 'zeros', '/dev/zero']]) {
        expect(await cli(args), args.join(' ')).to.deep.include({ code: 2, stdout: Buffer.alloc(0), stderr: line })
      }
      expect(fs.readdirSync(path.join(c.db, 'tmp'))).to.deep.equal([])
      c.db = path.join(t.dir, 'none')
      expect(await cli(['put', '/dev/zero'])).to.include({ code: 2, stderr: line })
      expect(fs.existsSync(c.db)).to.equal(false)
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
      const store = kfs(c.db)
      const before = await store.stat(sha256(data))
      await store.close()
      await cli(['put', file('a', data)])
      const again = kfs(c.db)
      expect((await again.stat(sha256(data))).mtime).to.deep.equal(before.mtime)
      await again.close()
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

'use strict'

const { expect } = require('chai')
const crypto = require('node:crypto')
const path = require('node:path')
const { Readable, Writable } = require('node:stream')
const kfs = require('..')
const { main } = require('../lib/cli/program')
const { useTmp, bytes } = require('./helpers')

// The command line run in this process, with standard streams that may say they are a
// terminal (isTTY), as they do on a user's screen.
function sink (isTTY) {
  const chunks = []
  const stream = new Writable({
    write (chunk, encoding, callback) {
      chunks.push(Buffer.from(chunk))
      callback()
    }
  })
  stream.isTTY = isTTY
  stream.text = () => Buffer.concat(chunks).toString('latin1')
  return stream
}

describe('kfs command line: terminals, empty input and --json', function () {
  const t = useTmp()
  const db = () => path.join(t.dir, 'db')

  async function run (args, { input = '', stdinTTY = false, stdoutTTY = false } = {}) {
    const stdin = Readable.from(input === '' ? [] : [Buffer.from(input, 'latin1')])
    stdin.isTTY = stdinTTY
    const stdout = sink(stdoutTTY)
    const stderr = sink(false)
    const code = await main(['node', 'kfs', ...args], { stdin, stdout, stderr, temps: new Set() }, { KFS_DB: db() })
    return { code, stdout: stdout.text(), stderr: stderr.text() }
  }

  it('get refuses to write a binary file to a terminal, unless told with - or --force', async () => {
    const binary = Buffer.concat([Buffer.alloc(1000, 'x'), Buffer.from([0]), Buffer.alloc(100, 'y')]).toString('latin1')
    expect((await run(['put', '--key', 'bin'], { input: binary })).code).to.equal(0)
    expect((await run(['put', '--key', 'text'], { input: 'hello\n' })).code).to.equal(0)

    const refused = await run(['get', 'bin'], { stdoutTTY: true })
    expect(refused.code).to.equal(2)
    expect(refused.stdout).to.equal('') // not a byte of it reached the terminal
    expect(refused.stderr).to.equal('kfs: the file looks binary and standard output is a terminal: give a FILE to write it to, or - (or --force) to write it here anyway\n')
    for (const args of [['get', 'bin', '-'], ['get', 'bin', '--force'], ['get', 'bin', '-f']]) {
      const r = await run(args, { stdoutTTY: true })
      expect(r.code, args.join(' ')).to.equal(0)
      expect(r.stdout, args.join(' ')).to.equal(binary)
    }
    // Text goes to a terminal, and binary to anything else.
    expect(await run(['get', 'text'], { stdoutTTY: true })).to.include({ code: 0, stdout: 'hello\n' })
    expect(await run(['get', 'bin'])).to.include({ code: 0, stdout: binary })
    // A range that skips the NUL byte is text.
    expect(await run(['get', 'bin', '--start', '1001'], { stdoutTTY: true })).to.include({ code: 0, stdout: 'y'.repeat(100) })
  })

  it('put from a terminal says it is reading standard input; an empty input is refused unless --allow-empty', async () => {
    const typed = await run(['put'], { input: 'typed', stdinTTY: true })
    expect(typed.code).to.equal(0)
    expect(typed.stderr).to.equal('kfs: reading standard input (end it with Ctrl-D)\n')
    expect((await run(['put'], { input: 'piped' })).stderr).to.equal('') // not a terminal: nothing said

    for (const args of [['put'], ['put', '-'], ['put', '--key', 'empty']]) {
      const r = await run(args)
      expect(r.code, args.join(' ')).to.equal(1)
      expect(r.stderr, args.join(' ')).to.equal('kfs: standard input was empty: nothing was stored (give --allow-empty to store an empty file)\n')
    }
    const store = kfs(db())
    try {
      expect((await store.usage()).files).to.equal(2) // typed and piped only
    } finally {
      await store.close()
    }
    const empty = await run(['put', '--allow-empty'])
    expect(empty).to.include({ code: 0, stdout: 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\n' })
    expect((await run(['put', '--key', 'zero', '--size', '0'])).code).to.equal(0) // asked for 0 bytes
    expect((await run(['stat', 'zero'])).stdout).to.match(/^size +0$/m)
  })

  it('--json prints every result, and every error, as JSON', async () => {
    const put = await run(['put', '--json', '--key', 'notes.txt'], { input: 'hello' })
    expect(JSON.parse(put.stdout)).to.deep.equal({ key: '7c8d2ed0c9fca9dc531231ee4d593b5c03f84e03' })
    expect(JSON.parse((await run(['--json', 'exists', 'notes.txt'])).stdout)).to.deep.equal({ exists: true })
    const missing = await run(['exists', 'other', '--json'])
    expect(missing.code).to.equal(1)
    expect(JSON.parse(missing.stdout)).to.deep.equal({ exists: false })
    expect(JSON.parse((await run(['stat', 'notes.txt', '--json'])).stdout)).to.include({ size: 5, name: 'notes.txt' })
    const usage = JSON.parse((await run(['stat', '--json'])).stdout)
    expect(usage).to.include({ files: 1, used: 5, reserve: 16 * 1024 * 1024 })
    expect(usage.disk).to.be.a('number')
    expect(JSON.parse((await run(['list', '--json'])).stdout)).to.include({ name: 'notes.txt', size: 5 })
    expect(JSON.parse((await run(['verify', '--json'])).stdout)).to.include({ files: 1 })
    const compacted = JSON.parse((await run(['compact', '--json'])).stdout)
    expect(compacted).to.have.keys('before', 'after', 'reclaimed')

    // Errors: one JSON line on stderr, with the code and what the error names; the exit
    // code is the same as without --json.
    const notFound = await run(['get', 'gone.txt', '--json'])
    expect(notFound.code).to.equal(1)
    expect(notFound.stdout).to.equal('')
    const key = crypto.createHash('ripemd160').update('gone.txt').digest('hex')
    expect(JSON.parse(notFound.stderr)).to.deep.equal({ error: { code: 'ENOENT', message: `no file named "gone.txt" (key ${key})`, key, fileName: 'gone.txt' } })
    // After `--`, --json is a file's name: the error is text.
    const file = await run(['put', '--', '--json'])
    expect(file.code).to.equal(1)
    expect(file.stderr).to.match(/^kfs: --json: no such file or directory\n$/)
    const usageError = await run(['list', '999', '--json'])
    expect(usageError.code).to.equal(2)
    expect(JSON.parse(usageError.stderr).error.code).to.equal('EINVAL')
    expect(usageError.stderr.trim().split('\n')).to.have.length(1)
  })

  it('stat shows the disk reserve beside the store\'s files; compact says when it reclaimed nothing', async () => {
    await run(['put', '--key', 'small'], { input: 'small' })
    const stat = (await run(['stat'])).stdout
    expect(stat).to.match(/^reserve +16777216$/m)
    expect(stat).to.match(/^disk +\d+$/m)
    const nothing = await run(['compact'])
    expect(nothing).to.include({ code: 0, stdout: `nothing to reclaim: ${db()} uses ${nothing.stdout.match(/uses (.*) on disk/)[1]} on disk\n` })

    await run(['put', '--key', 'big'], { input: bytes(8 * 1024 * 1024, 'b').toString('latin1') })
    // unlink gives the space back itself before it exits, so overwrite the file in a
    // store opened without reclaiming, then compact.
    const store = kfs(db(), { reclaim: false })
    try {
      await store.writeFile('big', 'now small')
    } finally {
      await store.close()
    }
    const reclaimed = await run(['compact'])
    expect(reclaimed.code).to.equal(0)
    expect(reclaimed.stdout).to.match(/^reclaimed \d+\.\d MiB: disk space used by .*: .* before, .* after\n$/)
  })
})

'use strict'

const { expect } = require('chai')
const fs = require('node:fs')
const path = require('node:path')
const { spawn } = require('node:child_process')
const { useTmp, rejects, scaled } = require('./helpers')

const BAD_KEYS = ['', null, undefined, 42, {}, [], true, Buffer.from('k'), 'x'.repeat(5000), '\ud800x', 'x\udc00']
const BAD_DATA = [null, undefined, 5, {}, [1], new ArrayBuffer(3), true]
const BAD_RANGES = [{ start: -1 }, { start: 1.5 }, { end: -1 }, { start: 5, end: 4 }, { start: '1' }, { start: NaN }, { start: Infinity }, { Start: 1 }, null]
const BAD_SHARDS = [-1, 256, 1.5, '3', null, NaN]

// Every file under dir with its size, except LevelDB's informational LOG files and
// spares (tmp/spare-*), which are made in the background after a shard is, whatever
// the calls do.
function snapshot (dir) {
  const out = {}
  const walk = (d) => {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const full = path.join(d, e.name)
      if (e.isDirectory()) {
        if (!(path.basename(d) === 'tmp' && e.name.startsWith('spare-'))) walk(full)
      } else if (!/^LOG(\.old)?$/.test(e.name)) out[path.relative(dir, full)] = fs.statSync(full).size
    }
  }
  walk(dir)
  return out
}

// Calls fn and expects EINVAL, thrown at once or rejected.
async function invalid (fn, label) {
  let err
  try {
    await fn()
  } catch (e) {
    err = e
  }
  expect(err, label).to.be.an('error')
  expect(err.code, `${label}: ${err.message}`).to.equal('EINVAL')
}

describe('bad input', function () {
  this.timeout(scaled(60000))
  const t = useTmp()

  it('every store method answers EINVAL and changes nothing on disk', async () => {
    const store = t.open({ openAhead: false }) // no shard made in the background meanwhile
    await store.writeFile('present', 'data')
    await store.usage()
    const before = snapshot(store.location)
    const key = 'present'
    const calls = []
    for (const bad of BAD_KEYS) {
      const l = `key ${String(bad).slice(0, 20)}`
      calls.push([`writeFile(${l})`, () => store.writeFile(bad, 'x')])
      calls.push([`readFile(${l})`, () => store.readFile(bad)])
      calls.push([`exists(${l})`, () => store.exists(bad)])
      calls.push([`stat(${l})`, () => store.stat(bad)])
      calls.push([`unlink(${l})`, () => store.unlink(bad)])
      calls.push([`createReadStream(${l})`, () => store.createReadStream(bad)])
      calls.push([`createWriteStream(${l})`, () => store.createWriteStream(bad)])
    }
    for (const bad of BAD_DATA) {
      calls.push([`writeFile(data ${String(bad)})`, () => store.writeFile(key, bad)])
      calls.push([`put(data ${String(bad)})`, () => store.put(bad)])
    }
    for (const bad of BAD_RANGES) calls.push([`createReadStream range ${JSON.stringify(bad)}`, () => store.createReadStream(key, bad)])
    for (const bad of [null, 'x', { sha256: 'no' }, { other: 1 }]) calls.push([`createWriteStream options ${JSON.stringify(bad)}`, () => store.createWriteStream(key, bad)])
    for (const bad of BAD_SHARDS) {
      calls.push([`list(${bad})`, () => store.list(bad)])
      calls.push([`verify({ shard: ${bad} })`, () => store.verify({ shard: bad })])
      calls.push([`repair(${bad})`, () => store.repair(bad)])
    }
    calls.push(['repair()', () => store.repair()])
    calls.push(['verify({ onProgress: 1 })', () => store.verify({ onProgress: 1 })])
    for (const [label, fn] of calls) await invalid(fn, label)
    expect(snapshot(store.location)).to.deep.equal(before)
    expect((await store.readFile(key)).toString()).to.equal('data')
  })

  it('every method given more arguments than it takes answers EINVAL, changing nothing', async () => {
    // One shard open at most: the shard written holds it, and none is made ahead.
    const store = t.open({ maxOpenShards: 1 })
    await store.writeFile('present', 'data')
    const before = snapshot(store.location)
    const calls = {
      open: () => store.open(1),
      writeFile: () => store.writeFile('k', 'data', {}, 1),
      readFile: () => store.readFile('present', 'utf8'),
      createWriteStream: () => store.createWriteStream('k', {}, 1),
      createReadStream: () => store.createReadStream('present', {}, 1),
      put: () => store.put('key', 'data'),
      exists: () => store.exists('present', () => {}),
      stat: () => store.stat('present', {}),
      unlink: () => store.unlink('present', () => {}),
      list: () => store.list(0, 1),
      usage: () => store.usage(true),
      diskUsage: () => store.diskUsage(1),
      reclaim: () => store.reclaim(1),
      compact: () => store.compact(() => {}),
      verify: () => store.verify({}, () => {}),
      repair: () => store.repair(0, {}),
      close: () => store.close(() => {})
    }
    for (const [method, call] of Object.entries(calls)) {
      let err
      try {
        await call()
      } catch (e) {
        err = e
      }
      expect(err && err.code, method).to.equal('EINVAL')
      expect(err.message, method).to.match(new RegExp(`^store\\.${method}\\(\\) takes (no arguments|\\d arguments? \\()`))
    }
    // fs's options are not writeFile's.
    expect((await rejects(store.writeFile('k', 'data', { encoding: 'utf8' }), 'EINVAL')).message).to.contain('unknown option "encoding"')
    expect((await rejects(store.writeFile('k', 'data', 'utf8'), 'EINVAL')).message).to.contain('takes no encoding')
    // The first call of a cacache or level user is pointed to the method that does it.
    const put = await rejects(store.put('notes.txt', 'hello'), 'EINVAL')
    expect(put.message).to.contain('use writeFile(key, data)')
    expect((await rejects(store.readFile('present', () => {}), 'EINVAL')).message).to.contain('takes no callback')
    // A Readable refused is destroyed, as a put that never reads it is: no descriptor
    // is left open, and no error of it is left without a listener.
    const source = fs.createReadStream(__filename)
    await rejects(store.put(source, () => {}), 'EINVAL')
    expect(source.destroyed).to.equal(true)
    // Only the store's own internal options pass: an object with other symbol keys (an
    // AbortSignal has some) is an extra argument.
    await rejects(store.put('x', new AbortController().signal), 'EINVAL')
    // A callback given to a method that returns no promise is told what it returns.
    let thrown
    try {
      store.list(0, () => {})
    } catch (err) {
      thrown = err
    }
    expect(thrown && thrown.message).to.contain('it returns an async iterable and takes no callback')
    // Trailing undefined arguments are absent ones.
    expect((await store.readFile('present', undefined)).toString()).to.equal('data')
    expect(await store.exists('notes.txt')).to.equal(false)
    expect(snapshot(store.location)).to.deep.equal(before)
    expect(store.status).to.equal('open') // close(callback) did not close it
  })

  it('errors about a file asked for by name give the name as well as the key', async () => {
    const store = t.open()
    const key = '7c8d2ed0c9fca9dc531231ee4d593b5c03f84e03' // RIPEMD-160 of "notes.txt"
    const named = `no file named "notes.txt" (key ${key})`
    for (const call of [() => store.readFile('notes.txt'), () => store.stat('notes.txt'), () => store.unlink('notes.txt')]) {
      const err = await rejects(call(), 'ENOENT')
      expect(err).to.include({ message: named, key, fileName: 'notes.txt' })
    }
    const rs = store.createReadStream('notes.txt')
    const err = await new Promise((resolve) => rs.on('error', resolve).resume())
    expect(err).to.include({ code: 'ENOENT', message: named, fileName: 'notes.txt' })
    // A name is given as it is, whatever characters it holds (`$&` is no pattern).
    for (const name of ['a$&b', "x$'y", '$$']) {
      const err = await rejects(store.readFile(name), 'ENOENT')
      expect(err.message).to.equal(`no file named ${JSON.stringify(name)} (key ${err.key})`)
    }
    // A hex key is a key: there is no name to give.
    const byKey = await rejects(store.readFile(key), 'ENOENT')
    expect(byKey.message).to.equal(`no file with key ${key}`)
    expect(byKey.fileName).to.equal(undefined)
  })

  it('a start beyond the end of the file is EINVAL once the size is known', async () => {
    const store = t.open()
    await store.writeFile('f', 'abc')
    const rs = store.createReadStream('f', { start: 4 })
    await rejects(new Promise((resolve, reject) => rs.on('error', reject).on('end', resolve).resume()), 'EINVAL')
  })

  describe('command line', () => {
    const BIN = path.join(__dirname, '..', 'bin', 'kfs.js')
    const cli = (args, env = {}) => new Promise((resolve) => {
      const child = spawn(process.execPath, [BIN, ...args], { env: { ...process.env, KFS_DB: path.join(t.dir, 'db'), ...env } })
      let stderr = ''
      child.stderr.on('data', (d) => (stderr += d))
      child.stdin.end()
      child.on('close', (code) => resolve({ code, stderr }))
    })

    it('every command answers a usage error with exit 2 and one kfs: line', async () => {
      const cases = [
        ['get', ''], ['unlink', ''], ['exists', ''], ['stat', ''], ['put', '--key', ''], ['get', 'k', '--start', '-1'],
        ['get', 'k', '--start', '5', '--end', '4'], ['list', '256'], ['list', 'x'], ['verify', '--shard', '999'],
        ['repair'], ['repair', 'abc'], ['compact', 'extra'], ['nonsense'], ['put', '--expires', 'soon'], ['trash'],
        ['restore-trash', 'extra'], ['empty-trash', '--before', '2030-02-30'], ['empty-trash', 'extra']
      ]
      for (const args of cases) {
        const r = await cli(args)
        expect(r.code, args.join(' ')).to.equal(2)
        expect(r.stderr.split('\n').filter(Boolean), args.join(' ')).to.have.length.within(1, 2)
        expect(r.stderr, args.join(' ')).to.match(/^kfs: /)
      }
      expect(fs.existsSync(path.join(t.dir, 'db'))).to.equal(false)
    })

    it('a store path that is a file, or a directory of another program, is refused untouched', async () => {
      const file = path.join(t.dir, 'a-file')
      fs.writeFileSync(file, 'mine')
      const r1 = await cli(['--db', file, 'list'])
      expect(r1.code).to.equal(1)
      expect(r1.stderr).to.equal(`kfs: the store path ${file} exists and is not a directory\n`)
      const dir = path.join(t.dir, 'photos')
      fs.mkdirSync(dir)
      fs.writeFileSync(path.join(dir, 'img.jpg'), 'jpeg')
      const r2 = await cli(['--db', dir, 'put'])
      expect(r2.code).to.equal(2)
      expect(r2.stderr).to.match(/^kfs: .*photos is not a kfs store/)
      expect(fs.readFileSync(file, 'utf8')).to.equal('mine')
      expect(fs.readdirSync(dir)).to.deep.equal(['img.jpg'])
    })
  })
})

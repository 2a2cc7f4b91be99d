'use strict'

// A new shard is made from a template of the files LevelDB makes for one
// (lib/shard/template.js), written, synced and renamed into place.
const { expect } = require('chai')
const fs = require('node:fs')
const path = require('node:path')
const { spawn } = require('node:child_process')
const kfs = require('..')
const { createShard, makeTemplate } = require('../lib/shard/create')
const { Shard } = require('../lib/shard/shard')
const { Spares, SPARES } = require('../lib/shard/spares')
const { useTmp, keysForShards, scaled, sleep } = require('./helpers')

const WRITER = path.join(__dirname, 'fixtures', 'new-store-writer.js')
const shardDirs = (dir) => fs.readdirSync(dir).filter((name) => /^\d{3}\.s$/.test(name)).sort()

// The files of a shard as LevelDB left them, but LOG (its diary of each open).
function contents (location) {
  return Object.fromEntries(fs.readdirSync(location).filter((name) => name !== 'LOG').sort().map((name) => [name, fs.readFileSync(path.join(location, name)).toString('hex')]))
}

const spareDirs = (dir) => fs.readdirSync(path.join(dir, 'tmp')).filter((name) => name.startsWith('spare-'))

// Resolves once `fn()` is true, polling.
async function until (fn, what) {
  for (const deadline = Date.now() + scaled(20000); Date.now() < deadline;) {
    if (fn()) return
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
  throw new Error(`timed out waiting for ${what}`)
}

// Starts the writer on a new store at `dir`, SIGKILLs it `ms` after it is ready, and
// resolves to the keys it stored.
function runAndKill (dir, ms) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [WRITER, dir], { stdio: ['ignore', 'pipe', 'pipe'] })
    let out = ''
    let err = ''
    let timer
    child.stdout.on('data', (d) => {
      out += d
      if (out.startsWith('ready\n') && !timer) timer = setTimeout(() => child.kill('SIGKILL'), ms)
    })
    child.stderr.on('data', (d) => (err += d))
    child.on('exit', (code, signal) => {
      clearTimeout(timer)
      if (signal !== 'SIGKILL') return reject(new Error(`the writer exited with ${code}: ${err}`))
      resolve(out.split('\n').slice(0, -1).filter((line) => line.startsWith('done ')).map((line) => line.slice(5)))
    })
  })
}

describe('new shards', function () {
  this.timeout(scaled(60000))
  const t = useTmp()

  it('are made from a template holding what LevelDB makes, which opens with its accounting', async () => {
    const tmp = path.join(t.dir, 'tmp')
    fs.mkdirSync(tmp)
    await createShard(path.join(t.dir, 'built.s'), tmp) // with LevelDB, as without a template
    const template = await makeTemplate(tmp)
    expect(template, 'LevelDB 1.20 made the files template.js expects').to.be.an('array')
    await createShard(path.join(t.dir, 'copied.s'), tmp, template)
    expect(contents(path.join(t.dir, 'copied.s'))).to.deep.equal(contents(path.join(t.dir, 'built.s')))
    expect(fs.readdirSync(tmp)).to.deep.equal([]) // the template's own shard is gone
    const shard = await Shard.open({ index: 0, location: path.join(t.dir, 'copied.s'), cap: 1e9, chunkKeys: 1, sync: false })
    try {
      expect({ used: shard.used, files: shard.files }).to.deep.equal({ used: 0, files: 0 })
    } finally {
      await shard.close()
    }
  })

  it('are made ahead as spares once one was made: whole, at most SPARES, renamed into place, and removed by close()', async () => {
    const tmp = path.join(t.dir, 'tmp')
    fs.mkdirSync(tmp)
    await createShard(path.join(t.dir, 'built.s'), tmp)
    const template = await makeTemplate(tmp)
    const spares = new Spares(tmp)
    expect(spares.take(template)).to.equal(undefined) // none yet; now made
    await until(() => spareDirs(t.dir).length === SPARES, 'the spares')
    await sleep(50)
    expect(spareDirs(t.dir)).to.have.length(SPARES) // no more
    const spare = spares.take(template)
    expect(contents(spare)).to.deep.equal(contents(path.join(t.dir, 'built.s')))
    await createShard(path.join(t.dir, 'spare.s'), tmp, template, { spare })
    expect(fs.existsSync(spare)).to.equal(false)
    const shard = await Shard.open({ index: 0, location: path.join(t.dir, 'spare.s'), cap: 1e9, chunkKeys: 1, sync: false })
    await shard.close()
    await spares.close()
    expect(fs.readdirSync(tmp)).to.deep.equal([])
    expect(spares.take(template)).to.equal(undefined) // and none made after close
    await sleep(50)
    expect(fs.readdirSync(tmp)).to.deep.equal([])
  })

  it('a spare that cannot be made is forgotten, and leaves nothing; one taken but not placed is removed', async () => {
    const tmp = path.join(t.dir, 'tmp')
    fs.mkdirSync(tmp)
    const template = await makeTemplate(tmp)
    const gone = new Spares(path.join(t.dir, 'missing'))
    expect(gone.take(template)).to.equal(undefined)
    await sleep(50)
    expect(gone.take(template)).to.equal(undefined)
    await gone.close()
    expect(fs.existsSync(path.join(t.dir, 'missing'))).to.equal(false)
    // A shard in the way: the spare taken for it is removed, nothing is renamed.
    const spares = new Spares(tmp)
    spares.take(template)
    await until(() => spareDirs(t.dir).length === SPARES, 'the spares')
    fs.mkdirSync(path.join(t.dir, 'taken.s'))
    const spare = spares.take(template)
    const err = await createShard(path.join(t.dir, 'taken.s'), tmp, template, { spare }).catch((e) => e)
    expect(err.code).to.equal('EEXIST')
    expect(fs.existsSync(spare)).to.equal(false)
    expect(fs.readdirSync(path.join(t.dir, 'taken.s'))).to.deep.equal([])
    await spares.close()
    expect(fs.readdirSync(tmp)).to.deep.equal([])
  })

  it('after clear(), no spare is left, nor made until the next take(); none while mayFill says no', async () => {
    const tmp = path.join(t.dir, 'tmp')
    fs.mkdirSync(tmp)
    const template = await makeTemplate(tmp)
    let room = true
    const spares = new Spares(tmp, () => room)
    expect(spares.take(template)).to.equal(undefined) // the first is being made
    await spares.clear() // while it is (a full disk)
    expect(spareDirs(t.dir)).to.deep.equal([])
    await sleep(100)
    expect(spareDirs(t.dir), 'made after clear()').to.deep.equal([])
    room = false
    expect(spares.take(template)).to.equal(undefined)
    await sleep(100)
    expect(spareDirs(t.dir), 'made while mayFill says no').to.deep.equal([])
    room = true
    spares.take(template)
    await until(() => spareDirs(t.dir).length === SPARES, 'the spares')
    await spares.close()
    expect(fs.readdirSync(tmp)).to.deep.equal([])
  })

  it('a store with every shard made makes no spare, and one closed leaves none', async () => {
    const dir = path.join(t.dir, 'small')
    const store = kfs(dir)
    await store.writeFile('one', 'x')
    await until(() => shardDirs(dir).length === 256, 'the shards made ahead')
    await until(() => spareDirs(dir).length === 0, 'the spares left to be removed') // none wanted
    await store.close()
    expect(fs.readdirSync(path.join(dir, 'tmp'))).to.deep.equal([])
  })

  it('a store whose shards are all made holds no spare, whatever its shardCount', async () => {
    const dir = path.join(t.dir, 'few')
    const store = kfs(dir, { shardCount: 2 })
    await store.writeFile('one', 'x')
    await until(() => shardDirs(dir).length === 2, 'the shards')
    await until(() => spareDirs(dir).length === 0, 'the spares left to be removed')
    await sleep(100)
    expect(spareDirs(dir), 'made once every shard was').to.deep.equal([])
    await store.close()
    expect(fs.readdirSync(path.join(dir, 'tmp'))).to.deep.equal([])
  })

  it('a new shard is known to the usage cache once made: its directory lost later is reported, not made anew', async () => {
    const dir = path.join(t.dir, 'lost')
    let store = kfs(dir)
    await store.open()
    const [lost, kept] = keysForShards(store.referenceId, 2)
    await store.writeFile(lost.key, 'lost')
    await store.writeFile(kept.key, 'kept')
    await store.close()
    const location = path.join(dir, `${String(lost.shard).padStart(3, '0')}.s`)
    fs.rmSync(location, { recursive: true })
    store = kfs(dir)
    try {
      const err = await store.writeFile(lost.key, 'again').catch((e) => e)
      expect(err).to.be.an('error')
      expect(err.code, err.message).to.equal('ECORRUPT')
      expect(fs.existsSync(location), 'not made anew').to.equal(false)
      expect((await store.readFile(kept.key)).toString()).to.equal('kept')
    } finally {
      await store.close()
    }
  })

  it('survive SIGKILL at 5 random moments of a new store making them: every shard opens, verify() is clean, every stored file reads', async function () {
    this.timeout(scaled(120000))
    for (let run = 1; run <= 5; run++) {
      const dir = path.join(t.dir, `crash-${run}`)
      const stored = await runAndKill(dir, 10 + Math.floor(Math.random() * 400))
      const left = shardDirs(dir).map((name) => Number(name.slice(0, 3))) // before the store makes more
      const store = kfs(dir)
      try {
        expect((await store.verify()).problems, `run ${run}`).to.deep.equal([])
        const usage = await store.usage() // figures of every shard there: each opens
        expect(usage.shards.map((s) => s.index), `run ${run}`).to.include.members(left)
        for (const key of stored) expect((await store.readFile(key)).toString(), `run ${run}: ${key}`).to.equal(key.repeat(50))
      } finally {
        await store.close()
      }
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })
})

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
const { useTmp } = require('./helpers')

const WRITER = path.join(__dirname, 'fixtures', 'new-store-writer.js')
const shardDirs = (dir) => fs.readdirSync(dir).filter((name) => /^\d{3}\.s$/.test(name)).sort()

// The files of a shard as LevelDB left them, but LOG (its diary of each open).
function contents (location) {
  return Object.fromEntries(fs.readdirSync(location).filter((name) => name !== 'LOG').sort().map((name) => [name, fs.readFileSync(path.join(location, name)).toString('hex')]))
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
  this.timeout(60000)
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

  it('survive SIGKILL at 5 random moments of a new store making them: every shard opens, verify() is clean, every stored file reads', async function () {
    this.timeout(120000)
    for (let run = 1; run <= 5; run++) {
      const dir = path.join(t.dir, `crash-${run}`)
      const stored = await runAndKill(dir, 10 + Math.floor(Math.random() * 400))
      const store = kfs(dir)
      try {
        expect((await store.verify()).problems, `run ${run}`).to.deep.equal([])
        const usage = await store.usage() // figures of every shard there: each opens
        expect(usage.shards.map((s) => s.index), `run ${run}`).to.deep.equal(shardDirs(dir).map((name) => Number(name.slice(0, 3))))
        for (const key of stored) expect((await store.readFile(key)).toString(), `run ${run}: ${key}`).to.equal(key.repeat(50))
      } finally {
        await store.close()
      }
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })
})

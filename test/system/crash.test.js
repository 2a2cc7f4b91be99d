'use strict'

const { expect } = require('chai')
const path = require('node:path')
const { spawn } = require('node:child_process')
const kfs = require('../..')
const { useTmp, collect, assertNoStrayChunks, scaled } = require('../helpers')
const { parse } = require('../fixtures/crash-content')

const WRITER = path.join(__dirname, '..', 'fixtures', 'crash-writer.js')
const KILLS = 25

// Starts the writer, lets it work for `ms` after it is ready, SIGKILLs it, and returns
// per key the states it may legally have been left in.
function runAndKill (dir, seed, ms) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [WRITER, dir, String(seed)], { stdio: ['ignore', 'pipe', 'pipe'] })
    let out = ''
    let err = ''
    child.stdout.on('data', (d) => {
      out += d
      if (out.startsWith('ready\n') && !child.timer) child.timer = setTimeout(() => child.kill('SIGKILL'), ms)
    })
    child.stderr.on('data', (d) => (err += d))
    child.on('exit', (code, signal) => {
      clearTimeout(child.timer)
      if (signal !== 'SIGKILL') return reject(new Error(`writer exited with ${code}: ${err}`))
      resolve(out)
    })
  })
}

// Replays the log onto `states` (key -> { done, inflight }). The kill may cut the last
// line short, so only newline-terminated lines count.
function replay (log, states) {
  for (const line of log.split('\n').slice(0, -1)) {
    const [event, key, version] = line.split(' ')
    if (!key) continue
    const state = states.get(key) || { done: 0, inflight: undefined }
    if (event === 'start') {
      state.inflight = Number(version)
    } else {
      state.done = Number(version)
      state.inflight = undefined
    }
    states.set(key, state)
  }
}

// A hang guard, not a speed bound: 25 kills took 44 s alone and 130 s beside the rest of
// the system suite (four files at once on two cores).
describe('crash safety', function () {
  this.timeout(scaled(360000))
  const t = useTmp()

  it(`survives SIGKILL at ${KILLS} random moments of writes, overwrites and unlinks`, async () => {
    const dir = path.join(t.dir, 'crash')
    const states = new Map()
    let midWrite = 0
    for (let run = 1; run <= KILLS; run++) {
      const log = await runAndKill(dir, run, 30 + Math.floor(Math.random() * 400))
      replay(log, states)
      const store = kfs(dir)
      await store.usage() // opens the shards the crash left dirty, discarding abandoned writes
      expect((await store.verify()).problems, `run ${run}`).to.deep.equal([])
      for (const [key, state] of states) {
        const allowed = [state.done, state.inflight].filter((v) => v !== undefined)
        if (state.inflight) midWrite++
        let found = 0
        try {
          const data = await store.readFile(key)
          const parsed = parse(data)
          expect(parsed.valid, `${key} holds damaged content`).to.equal(true)
          expect(parsed.key).to.equal(key)
          found = parsed.version
        } catch (err) {
          if (err.code !== 'ENOENT') throw err
        }
        expect(allowed, `run ${run}: ${key} holds version ${found}`).to.include(found)
        // From now on the reopened store's state is the truth for this key.
        states.set(key, { done: found, inflight: undefined })
      }
      const listed = await collect(store.list())
      const usage = await store.usage()
      expect(usage.used).to.equal(listed.reduce((sum, f) => sum + f.size, 0))
      expect(usage.files).to.equal(listed.length)
      await store.close()
      await assertNoStrayChunks(t.dir)
    }
    expect(midWrite, 'kills that landed mid-operation').to.be.above(KILLS / 2)
  })
})

'use strict'

// Runs one crash-state workload (states.test.js) against a store, or against one raw
// LevelDB, under the recording filesystem, and marks on it what each step began and
// when its promise resolved. Writes the steps' outcomes (key, SHA-256 of the data or
// null for an unlink, synced or not) as JSON to `spec.outcomes`, outside the mount.
// usage: node workload.js SPEC_JSON

const fs = require('node:fs')
const crypto = require('node:crypto')

const spec = JSON.parse(process.argv[2])
const markFd = fs.openSync(spec.mark, 'w')
const mark = (text) => fs.writeSync(markFd, text + '\n')
const outcomes = []
const current = new Map() // key -> the SHA-256 it was last written with
const trashed = new Set() // keys in the trash

// Deterministic bytes, so that a run can be repeated: the step's number and size seed them.
function data (n, size) {
  const out = Buffer.alloc(size)
  let block = crypto.createHash('sha256').update(`${spec.seed || 0}/${n}/${size}`).digest()
  for (let at = 0; at < size; at += block.length) {
    block.copy(out, at)
    block = crypto.createHash('sha256').update(block).digest()
  }
  return out
}

// Runs one step: ['write', key, size, expiresIn], ['put', size, expiresIn] (the key is
// the content's SHA-256; expiresIn, optional: ms from now to its expiry), ['unlink', key],
// ['trash', key], ['restore'], ['empty'] (the whole trash), ['compact'], ['collect', files]
// (waits until the store collected `files` expired files itself), or ['together', ...steps]
// run at once.
async function step (engine, s, sync) {
  if (s[0] === 'together') return Promise.all(s.slice(1).map((t) => step(engine, t, sync)))
  if (s[0] === 'restore' || s[0] === 'empty') return wholeTrash(engine, s[0])
  if (s[0] === 'compact' || s[0] === 'collect') {
    mark(`begin ${s[0]}`)
    await engine[s[0]](...s.slice(1))
    return mark(`ack ${s[0]}`)
  }
  const n = outcomes.length
  const [op, ...args] = s
  const [size, expiresIn] = op === 'put' ? args : args.slice(1)
  const bytes = op === 'unlink' || op === 'trash' ? undefined : data(n, size)
  const sha256 = bytes ? crypto.createHash('sha256').update(bytes).digest('hex') : null
  const key = op === 'put' ? sha256 : args[0]
  trashed.delete(key)
  if (op === 'trash') trashed.add(key)
  else current.set(key, sha256)
  const expires = expiresIn === undefined ? undefined : Date.now() + expiresIn
  outcomes.push({ key, sha256, sync, expires })
  mark(`begin ${n}`)
  if (op === 'put') {
    if (await engine.put(bytes, expires) !== key) throw new Error(`put() did not resolve to the content's SHA-256 ${key}`)
  } else {
    await (op === 'write' ? engine.write(key, bytes, expires) : op === 'trash' ? engine.trash(key) : engine.unlink(key))
  }
  mark(`ack ${n}`)
}

// restoreTrash() or emptyTrash(): one outcome per key in the trash, each synced (both
// are, whatever the store's sync): back with its content, or gone for good.
async function wholeTrash (engine, op) {
  const keys = [...trashed]
  trashed.clear()
  const first = outcomes.length
  for (const key of keys) outcomes.push({ key, sha256: op === 'restore' ? current.get(key) : null, sync: true })
  keys.forEach((key, i) => mark(`begin ${first + i}`))
  await (op === 'restore' ? engine.restoreTrash() : engine.emptyTrash())
  keys.forEach((key, i) => mark(`ack ${first + i}`))
}

async function kfsEngine () {
  const kfs = require('../..')
  const store = await kfs(spec.dir, spec.options)
  return {
    write: (key, bytes, expires) => store.writeFile(key, bytes, { expires }),
    put: (bytes, expires) => store.put(bytes, { expires }),
    unlink: (key) => store.unlink(key),
    trash: (key) => store.trash(key),
    restoreTrash: () => store.restoreTrash(),
    emptyTrash: () => store.emptyTrash(),
    compact: () => store.compact(),
    collect: async (files) => {
      const end = Date.now() + 120000
      const collected = async () => (await store.metrics()).expiries.files
      while (await collected() < files) {
        if (Date.now() > end) throw new Error(`the store collected ${await collected()} expired files in 120 s, not ${files}`)
        await new Promise((resolve) => setTimeout(resolve, 50))
      }
    },
    close: () => store.close()
  }
}

// One raw LevelDB: each file one value, every write synced.
async function leveldbEngine () {
  const leveldown = require('leveldown')
  const db = leveldown(spec.dir)
  const call = (fn) => new Promise((resolve, reject) => fn((err) => (err ? reject(err) : resolve())))
  fs.mkdirSync(spec.dir, { recursive: true })
  await call((cb) => db.open({ createIfMissing: true, compression: false }, cb))
  return {
    write: (key, bytes) => call((cb) => db.put(key, bytes, { sync: true }, cb)),
    unlink: (key) => call((cb) => db.del(key, { sync: true }, cb)),
    compact: () => call((cb) => db.compactRange('\x00', '\xff', cb)),
    close: () => call((cb) => db.close(cb))
  }
}

async function main () {
  mark('begin open')
  const engine = spec.engine === 'leveldb' ? await leveldbEngine() : await kfsEngine()
  mark('ack open')
  const sync = spec.engine === 'leveldb' || Boolean(spec.options && spec.options.sync)
  for (const s of spec.steps) await step(engine, s, sync)
  await engine.close()
  fs.writeFileSync(spec.outcomes, JSON.stringify(outcomes))
}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})

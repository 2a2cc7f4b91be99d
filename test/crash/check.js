'use strict'

// Opens one crash state in a fresh process, as the next run after a power cut would,
// reads every key the workload touched and runs verify(), and prints what it found as
// JSON: { opened, error, reads: { key: SHA-256 | error code }, problems, repaired }.
// If verify() named damaged shards, repairs them as a user would (kfs repair N), then
// reads and verifies again: repaired is { shards, dropped, unaccounted, reads, problems }.
// usage: node check.js SPEC_JSON  (spec: engine, dir, options, keys)

const crypto = require('node:crypto')

const spec = JSON.parse(process.argv[2])
const sha256 = (bytes) => crypto.createHash('sha256').update(bytes).digest('hex')

async function kfsState () {
  const kfs = require('../..')
  const store = await kfs(spec.dir, spec.options)
  const look = async () => {
    const reads = {}
    for (const key of spec.keys) {
      reads[key] = await store.readFile(key).then(sha256, (err) => err.code || err.message)
    }
    return { reads, problems: (await store.verify()).problems }
  }
  try {
    const found = await look()
    const shards = [...new Set(found.problems.map((p) => p.shard))]
    if (!shards.length) return found
    const repaired = { shards, dropped: [], unaccounted: 0 }
    for (const shard of shards) {
      const result = await store.repair(shard)
      repaired.dropped.push(...result.dropped)
      repaired.unaccounted += result.unaccounted
    }
    return { ...found, repaired: { ...repaired, ...(await look()) } }
  } finally {
    await store.close()
  }
}

async function leveldbState () {
  const leveldown = require('leveldown')
  const db = leveldown(spec.dir)
  const call = (fn) => new Promise((resolve, reject) => fn((err, value) => (err ? reject(err) : resolve(value))))
  require('node:fs').mkdirSync(spec.dir, { recursive: true })
  await call((cb) => db.open({ createIfMissing: true, compression: false }, cb))
  try {
    const reads = {}
    for (const key of spec.keys) {
      reads[key] = await call((cb) => db.get(key, { asBuffer: true }, cb)).then(sha256, (err) => (/NotFound/.test(err.message) ? 'ENOENT' : err.message))
    }
    return { reads, problems: [] }
  } finally {
    await call((cb) => db.close(cb))
  }
}

(spec.engine === 'leveldb' ? leveldbState() : kfsState()).then(
  (found) => console.log(JSON.stringify({ opened: true, ...found })),
  (err) => console.log(JSON.stringify({ opened: false, error: `${err.code || ''} ${err.message}` }))
)

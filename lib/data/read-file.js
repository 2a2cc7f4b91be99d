'use strict'

const { constants: { MAX_LENGTH } } = require('node:buffer')
const { contentHash } = require('../api/keys')
const { recordOf, intact } = require('../shard/chunk-record')
const { checkDigest, damagedChunk } = require('./chunk-reader')
const { OFFLOAD_DIGEST_BYTES } = require('./digester')
const errors = require('../api/errors')

// Chunks readFile sends to the Digester's thread to check at a time.
const CHECK_BATCH = 8
// readFile's way of saying that the thread checking its chunks failed.
const THREAD_FAILED = Symbol('the digest thread failed')

// The whole file `key` in one Buffer, every byte checked before it is returned.
// files: the store's Files; digester: its Digester. unchecked: perf/probes/throughput.js only.
async function readFile (files, digester, key, { unchecked = false } = {}) {
  const small = await files.readSmall(key, { unchecked })
  if (small.data) return small.data
  let { meta, lease } = small
  for (let offload = true; ; offload = false) {
    // The reader leaves the chunk digests to readChecked. It holds readSmall's lease,
    // and tries the version read there first (reading again if a commit replaced it
    // since); a second try takes a lease of its own.
    const reader = await files.openReader(key, {}, { sha256: false, unchecked: true, meta, lease })
    lease = undefined
    meta = reader.meta
    try {
      if (reader.length > MAX_LENGTH) throw errors.tooBigToRead(key, reader.length)
      if (!reader.meta.chunkDigest) return await readFormat1(reader, digester)
      const check = unchecked ? 'no' : offload && reader.length >= OFFLOAD_DIGEST_BYTES ? 'thread' : 'here'
      return await readChecked(reader, digester, check)
    } catch (err) {
      if (err !== THREAD_FAILED) throw err
    } finally {
      await reader.close()
    }
  }
}

// Checks every chunk's digest before returning, `check` 'here' or 'thread' (CHECK_BATCH
// at a time, while this thread copies the next; 'no' is perf/'s). Should the thread
// fail, the records it held are gone: THREAD_FAILED, and readFile reads again.
async function readChecked (reader, digester, check) {
  const out = Buffer.allocUnsafe(reader.length)
  const { shard, meta } = reader
  const checks = []
  let batch = { first: 0, keys: [], records: [] }
  const send = () => {
    const { first, keys, records } = batch
    checks.push(digester.checkChunks(keys, records).then((bad) => (bad === -1 ? -1 : first + bad)))
    checks[checks.length - 1].catch(() => {}) // awaited below
    batch = { first: first + keys.length, keys: [], records: [] }
  }
  let offset = 0
  for (let index = 0, piece = await reader.read(); piece; index++, piece = await reader.read()) {
    // A head's data was checked with it.
    if (meta.inline) {
      offset += piece.copy(out, offset)
      continue
    }
    const chunkKey = shard.chunkKeys.key(meta.key, meta.version, index)
    const record = recordOf(piece)
    if (check === 'here' && !intact(chunkKey, record)) throw damagedChunk(meta.key, index)
    offset += piece.copy(out, offset)
    if (check !== 'thread') continue
    batch.keys.push(chunkKey)
    batch.records.push(record)
    if (batch.keys.length === CHECK_BATCH) send()
  }
  if (batch.keys.length) send()
  const bad = (await Promise.all(checks).catch(() => { throw THREAD_FAILED })).find((i) => i !== -1)
  if (bad !== undefined) throw damagedChunk(meta.key, bad)
  return out
}

// Format 1 has no chunk digests: the SHA-256 is checked, for a large file on the
// Digester's thread (each chunk handed over once copied), here if the thread fails.
async function readFormat1 (reader, digester) {
  const job = reader.length >= OFFLOAD_DIGEST_BYTES ? digester.begin() : undefined
  const hash = job ? undefined : contentHash()
  const out = Buffer.allocUnsafe(reader.length)
  let offset = 0
  try {
    for (let piece = await reader.read(); piece; piece = await reader.read()) {
      offset += piece.copy(out, offset)
      if (job) digester.update(job, piece)
      else hash.update(piece)
    }
  } catch (err) {
    if (job) digester.cancel(job)
    throw err
  }
  const digest = job ? await digester.finish(job).catch(() => contentHash().update(out).digest('hex')) : hash.digest('hex')
  checkDigest(reader.meta, digest)
  return out
}

module.exports = { readFile }

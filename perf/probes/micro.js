'use strict'

// Micro-benchmarks of the hot small functions. Prints operations per second with the
// relative margin of error at 95% confidence (benchmark.js's own, over its many runs).

const { Suite } = require('benchmark')
const crypto = require('node:crypto')
const { coerceKey } = require('../../lib/api/keys')
const { shardFor, routingByte } = require('../../lib/shard/routing')
const { ChunkKeys, encodeMeta, decodeMeta } = require('../../lib/shard/records')
const { cli, parseCommandLine, teeOutput } = require('../harness/script')

const COMMAND = cli(__filename, { run: 'npm run bench:micro --' })
teeOutput(parseCommandLine(COMMAND), COMMAND)

const referenceId = crypto.randomBytes(20)
const hexKey = crypto.randomBytes(32).toString('hex')
const name = 'photos/2026/holiday-0042.jpg'
const chunkKeys = new ChunkKeys(32 * 1024 ** 3, 128 * 1024)
const version = crypto.randomBytes(8).toString('hex')
const meta = { key: hexKey, version, size: 123456789, chunks: 942, sha256: hexKey, mtime: Date.now(), name }
const encoded = encodeMeta(meta)
let sink

new Suite('kfs hot paths')
  .add('coerceKey(hex key)', () => { sink = coerceKey(hexKey) })
  .add('coerceKey(name) with RIPEMD-160', () => { sink = coerceKey(name) })
  .add('routingByte (SHA-256 of the key)', () => { sink = routingByte(hexKey) })
  .add('shardFor', () => { sink = shardFor(referenceId, hexKey) })
  .add('chunk key encoding', () => { sink = chunkKeys.key(hexKey, version, 4711) })
  .add('metadata encoding', () => { sink = encodeMeta(meta) })
  .add('metadata decoding', () => { sink = decodeMeta(encoded, 'bench') })
  .on('cycle', (event) => {
    const b = event.target
    console.log(`${b.name.padEnd(36)} ${Math.round(b.hz).toLocaleString('en').padStart(12)} ops/sec ±${b.stats.rme.toFixed(2)}% (${b.stats.sample.length} runs)`)
  })
  .on('complete', () => {
    // Results go to `sink` so the engine cannot drop the work as dead code.
    if (sink === undefined) throw new Error('the benchmarked functions returned nothing')
  })
  .run()

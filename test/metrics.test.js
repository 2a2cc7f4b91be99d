'use strict'

// The operator's view: store.metrics(), and GET /metrics on the holder's socket in
// Prometheus's text format (doc/api.md, "Metrics").
const { expect } = require('chai')
const http = require('node:http')
const path = require('node:path')
const { Readable } = require('node:stream')
const { pipeline } = require('node:stream/promises')
const kfs = require('..')
const { useTmp, rejects, scaled, bytes, collect, REF } = require('./helpers')
const { holder } = require('./share-harness')
const { DURATION_BUCKETS } = require('../lib/api/metrics')
const { LevelDb } = require('../lib/leveldb/leveldb')

const KiB = 1024

// GET (or `method`) `url` on the store's socket: { status, type, text }.
function scrape (dir, url = '/metrics', method = 'GET') {
  return new Promise((resolve, reject) => {
    const req = http.request({ socketPath: path.join(dir, 'kfs.sock'), path: url, method, agent: false }, (res) => {
      let text = ''
      res.setEncoding('utf8')
      res.on('data', (part) => { text += part })
      res.on('end', () => resolve({ status: res.statusCode, type: res.headers['content-type'], text }))
      res.on('error', reject)
    })
    req.on('error', reject)
    req.end()
  })
}

// The text format, version 0.0.4: { types: name -> type, samples: [{ name, labels, value }] }.
// Every line is a comment or a sample; anything else throws.
function parse (text) {
  const types = new Map()
  const samples = []
  expect(text.endsWith('\n'), 'the text ends with a line feed').to.equal(true)
  for (const line of text.slice(0, -1).split('\n')) {
    if (line.startsWith('# TYPE ')) {
      const [name, type] = line.slice(7).split(' ')
      expect(types.has(name), `${name} typed once`).to.equal(false)
      types.set(name, type)
      continue
    }
    if (line.startsWith('# HELP ')) continue
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line)
    if (!m) throw new Error(`not a sample line: ${JSON.stringify(line)}`)
    const labels = {}
    const rest = (m[2] || '').replace(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)",?/g, (_, k, v) => {
      labels[k] = v.replace(/\\(.)/g, (__, c) => (c === 'n' ? '\n' : c))
      return ''
    })
    if (rest !== '') throw new Error(`bad labels in ${JSON.stringify(line)}`)
    const value = m[3] === '+Inf' ? Infinity : Number(m[3])
    expect(Number.isNaN(value), line).to.equal(false)
    samples.push({ name: m[1], labels, value })
  }
  return { types, samples }
}

// The value of the sample `name` with `labels` (each given one matching), or undefined.
function value ({ samples }, name, labels = {}) {
  const found = samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
  expect(found.length, `${name} ${JSON.stringify(labels)} at most once`).to.be.at.most(1)
  return found.length ? found[0].value : undefined
}

const GAUGES = ['kfs_files', 'kfs_file_bytes', 'kfs_disk_bytes', 'kfs_reclaimable_bytes', 'kfs_reserve_bytes', 'kfs_shards_open', 'kfs_memory_bytes', 'kfs_clients']
const COUNTERS = ['kfs_operations_total', 'kfs_errors_total', 'kfs_shard_opens_total', 'kfs_flushes_total', 'kfs_reclaim_runs_total']

function sumShards (usage, field) {
  return usage.shards.reduce((sum, s) => sum + s[field], 0)
}

describe('metrics', function () {
  this.timeout(scaled(60000))
  const t = useTmp()

  it('GET /metrics is Prometheus text 0.0.4 with the names and labels documented, and the same figures as metrics() and usage()', async () => {
    const store = t.open({ referenceId: REF, shardCount: 16, reclaim: false })
    for (let i = 0; i < 20; i++) await store.writeFile(`f${i}`, bytes(3 * KiB + i, `f${i}`))
    await store.unlink('f0')
    const { status, type, text } = await scrape(store.location)
    expect(status).to.equal(200)
    expect(type).to.equal('text/plain; version=0.0.4')
    expect(await scrape(store.location, '/metrics', 'HEAD')).to.deep.equal({ status: 200, type, text: '' })
    const parsed = parse(text)
    for (const name of GAUGES) expect(parsed.types.get(name), name).to.equal('gauge')
    for (const name of COUNTERS) expect(parsed.types.get(name), name).to.equal('counter')
    expect(parsed.types.get('kfs_operation_duration_seconds')).to.equal('histogram')
    for (const part of ['write', 'readahead', 'memtables']) expect(value(parsed, 'kfs_memory_bytes', { part }), part).to.be.a('number')
    for (const op of ['writeFile', 'readFile', 'unlink', 'createReadStream', 'createWriteStream', 'put', 'list']) {
      expect(value(parsed, 'kfs_operations_total', { op }), op).to.be.a('number')
      const buckets = parsed.samples.filter((s) => s.name === 'kfs_operation_duration_seconds_bucket' && s.labels.op === op)
      expect(buckets.map((s) => s.labels.le), op).to.deep.equal([...DURATION_BUCKETS.map(String), '+Inf'])
    }
    const [usage, metrics] = await Promise.all([store.usage(), store.metrics()])
    expect(value(parsed, 'kfs_files')).to.equal(19).and.equal(usage.files).and.equal(metrics.files)
    expect(value(parsed, 'kfs_file_bytes')).to.equal(usage.used).and.equal(metrics.fileBytes)
    expect(value(parsed, 'kfs_reclaimable_bytes')).to.equal(3 * KiB).and.equal(usage.reclaimable).and.equal(metrics.reclaimableBytes)
    expect(usage.reclaimable).to.equal(sumShards(usage, 'reclaimable'))
    expect(value(parsed, 'kfs_reserve_bytes')).to.equal(usage.reserve).and.equal(metrics.reserveBytes)
    expect(metrics.capacityBytes).to.equal(usage.capacity)
    expect(metrics.shards).to.equal(usage.shards.length)
    expect(value(parsed, 'kfs_operations_total', { op: 'writeFile' })).to.equal(20)
    // A scrape is no call of the store's: scraping again counts nothing more.
    const again = parse((await scrape(store.location)).text)
    expect(value(again, 'kfs_operations_total', { op: 'usage' })).to.equal(1)
    expect(again.samples.filter((s) => s.labels.op === 'metrics')).to.deep.equal([])
  })

  it('counts every call by method, its errors by code, and its duration in the histogram', async () => {
    const store = t.open({ referenceId: REF, shardCount: 16 })
    await store.writeFile('a', 'alpha')
    await store.readFile('a')
    await rejects(store.readFile('missing'), 'ENOENT')
    await rejects(store.unlink('missing'), 'ENOENT')
    await store.unlink('a')
    await store.put('content')
    await store.put(Readable.from([Buffer.from('streamed')]))
    await pipeline(Readable.from([Buffer.from('s')]), store.createWriteStream('s'))
    await collect(store.createReadStream('s'))
    const failed = store.createReadStream('missing')
    await rejects(collect(failed), 'ENOENT')
    await collect(store.list())
    const { operations: ops } = await store.metrics()
    expect(ops.writeFile).to.deep.include({ count: 1, errors: {} })
    expect(ops.readFile).to.deep.include({ count: 2, errors: { ENOENT: 1 } })
    expect(ops.unlink).to.deep.include({ count: 2, errors: { ENOENT: 1 } })
    expect(ops.put).to.deep.include({ count: 2, errors: {} }) // a Buffer, and a Readable
    expect(ops.createWriteStream).to.deep.include({ count: 1, errors: {} })
    expect(ops.createReadStream).to.deep.include({ count: 2, errors: { ENOENT: 1 } })
    expect(ops.list).to.deep.include({ count: 1, errors: {} })
    expect(ops.putStream, 'put(stream) is put').to.equal(undefined)
    for (const [op, { count, seconds }] of Object.entries(ops)) {
      expect(seconds.buckets.length, op).to.equal(DURATION_BUCKETS.length + 1)
      expect(seconds.buckets[seconds.buckets.length - 1], op).to.equal(count)
      seconds.buckets.forEach((n, i) => expect(n, `${op} cumulative`).to.be.at.least(i ? seconds.buckets[i - 1] : 0))
      expect(seconds.sum > 0, op).to.equal(count > 0)
    }
    const parsed = parse((await scrape(store.location)).text)
    expect(value(parsed, 'kfs_errors_total', { op: 'readFile', code: 'ENOENT' })).to.equal(1)
    expect(value(parsed, 'kfs_operation_duration_seconds_count', { op: 'readFile' })).to.equal(2)
    expect(value(parsed, 'kfs_operation_duration_seconds_bucket', { op: 'readFile', le: '+Inf' })).to.equal(2)
    expect(value(parsed, 'kfs_operation_duration_seconds_sum', { op: 'readFile' })).to.equal(ops.readFile.seconds.sum)
  })

  it('the gauges follow files written, removed and reclaimed', async () => {
    const store = t.open({ referenceId: REF, shardCount: 16, reclaim: false })
    const size = 256 * KiB
    for (let i = 0; i < 8; i++) await store.writeFile(`f${i}`, bytes(size, `f${i}`))
    let m = await store.metrics()
    expect(m).to.include({ files: 8, fileBytes: 8 * size, reclaimableBytes: 0 })
    expect(m.diskBytes).to.be.at.least(8 * size)
    for (let i = 0; i < 8; i++) await store.unlink(`f${i}`)
    m = await store.metrics()
    expect(m).to.include({ files: 0, fileBytes: 0, reclaimableBytes: 8 * size })
    expect((await store.usage()).reclaimable).to.equal(8 * size)
    const runs = m.reclaims.runs
    await store.reclaim()
    // usage() reads the open shards' disk bytes now; a scrape, once 5 s old: it finds these.
    const usage = await store.usage()
    m = await store.metrics()
    expect(m).to.include({ files: 0, fileBytes: 0, reclaimableBytes: 0, diskBytes: sumShards(usage, 'diskBytes') })
    expect(m.diskBytes).to.be.below(size)
    expect(m.reclaims.runs).to.equal(runs + 1)
    expect(m.reclaims.pieces).to.be.at.least(1)
    expect(usage.reclaimable).to.equal(0)
  })

  it('a scrape opens no shard: the figures of closed shards are those cached at their close', async () => {
    let store = t.open({ referenceId: REF, shardCount: 16 })
    for (let i = 0; i < 30; i++) await store.writeFile(`f${i}`, bytes(2 * KiB, `f${i}`))
    for (let i = 0; i < 5; i++) await store.unlink(`f${i}`)
    await store.close()
    store = t.open({ openAhead: false })
    await store.open() // held here: it serves the socket
    const { text } = await scrape(store.location)
    const parsed = parse(text)
    expect(value(parsed, 'kfs_shards_open')).to.equal(0)
    expect(value(parsed, 'kfs_shard_opens_total')).to.equal(0)
    expect(value(parsed, 'kfs_files')).to.equal(25)
    expect(value(parsed, 'kfs_reclaimable_bytes')).to.equal(5 * 2 * KiB)
    const usage = await store.usage()
    const m = await store.metrics()
    expect(m).to.include({ shardsOpen: 0, shardOpens: 0, shardsUncounted: 0, files: usage.files, fileBytes: usage.used, reclaimableBytes: usage.reclaimable })
    expect(m.diskBytes).to.equal(sumShards(usage, 'diskBytes'))
  })

  it('a scrape of a store with its shards open reads their disk bytes at most once per 5 s; usage() reads again those of the shards written since', async () => {
    const store = t.open({ referenceId: REF, shardCount: 16, openAhead: false }) // the shards the writes opened
    for (let i = 0; i < 40; i++) await store.writeFile(`f${i}`, bytes(KiB, `f${i}`))
    const logBytes = LevelDb.prototype.logBytes
    let reads = 0
    LevelDb.prototype.logBytes = function () {
      reads++
      return logBytes.call(this)
    }
    try {
      const first = await store.metrics()
      const open = first.shardsOpen
      expect(open).to.equal(first.shards).and.be.above(8)
      const read = reads
      expect(read).to.equal(open)
      for (let i = 0; i < 5; i++) await store.metrics()
      await scrape(store.location)
      expect(reads).to.equal(read)
      const before = await store.usage()
      expect(sumShards(before, 'diskBytes')).to.equal(first.diskBytes)
      expect(reads).to.equal(read) // nothing written since
      await store.writeFile('f0', bytes(2 * KiB, 'again'))
      const usage = await store.usage()
      expect(reads).to.equal(read + 1) // the shard written
      const { shard } = await store.stat('f0')
      const diskOf = (u) => u.shards.find((s) => s.index === shard).diskBytes
      expect(diskOf(usage)).to.be.above(diskOf(before)) // its log holds the write
      expect((await store.metrics()).diskBytes).to.equal(sumShards(usage, 'diskBytes'))
    } finally {
      LevelDb.prototype.logBytes = logBytes
    }
  })

  it('figures cached without the removed versions\' bytes (an older kfs) count once their shard opened, and usage() opens it', async () => {
    let store = t.open({ referenceId: REF, shardCount: 16 })
    for (let i = 0; i < 30; i++) await store.writeFile(`f${i}`, bytes(2 * KiB, `f${i}`))
    for (let i = 0; i < 5; i++) await store.unlink(`f${i}`)
    const before = await store.usage()
    await store.close()
    const state = await LevelDb.open(path.join(store.location, 'state'))
    let shards = 0
    try {
      for await (const { key, value } of state.scan({ gt: 'usage!', lt: 'usage!\xff', keyAsBuffer: false, valueAsBuffer: false })) {
        const { dead, ...older } = JSON.parse(value)
        expect(dead, key).to.be.a('number')
        await state.put(key, JSON.stringify(older))
        shards++
      }
    } finally {
      await state.close()
    }
    // Read-only, which cannot write them again: each shard is read once, then trusted here.
    const reader = t.open({ readOnly: true, maxOpenShards: 1 }) // closed again as the next opens
    expect(await reader.usage()).to.include({ files: 25, reclaimable: 5 * 2 * KiB })
    const opened = (await reader.metrics()).shardOpens
    expect(opened).to.equal(shards)
    await reader.usage()
    expect((await reader.metrics()).shardOpens).to.equal(opened)
    await reader.close()
    store = t.open({ openAhead: false })
    const m = await store.metrics()
    expect(m).to.include({ shardsOpen: 0, shardsUncounted: shards, files: 0, reclaimableBytes: 0 })
    const usage = await store.usage()
    expect(usage).to.include({ files: 25, reclaimable: 5 * 2 * KiB })
    expect(usage.shards.map((s) => s.reclaimable)).to.deep.equal(before.shards.map((s) => s.reclaimable))
    expect(await store.metrics()).to.include({ shardsUncounted: 0, files: 25, reclaimableBytes: 5 * 2 * KiB })
  })

  it('through a holder: the holder counts the calls it serves as the caller\'s methods, once, and every process sees its figures', async () => {
    const dir = path.join(t.dir, 'store')
    const held = await holder(dir, { referenceId: REF, shardCount: 16 })
    try {
      const store = kfs(dir)
      try {
        await store.writeFile('a', 'alpha')
        await store.readFile('a')
        await rejects(store.readFile('missing'), 'ENOENT')
        await collect(store.createReadStream('a'))
        await pipeline(Readable.from([Buffer.from('s')]), store.createWriteStream('s'))
        await store.unlink('a')
        const m = await store.metrics()
        expect(store.heldBy).to.equal(held.child.pid)
        expect(m.operations.writeFile).to.deep.include({ count: 1, errors: {} })
        expect(m.operations.readFile).to.deep.include({ count: 2, errors: { ENOENT: 1 } })
        expect(m.operations.createReadStream).to.deep.include({ count: 1 })
        expect(m.operations.createWriteStream).to.deep.include({ count: 1 })
        expect(m.operations.unlink).to.deep.include({ count: 1 })
        expect(m.operations.metrics, 'metrics() is not counted').to.equal(undefined)
        expect(m).to.include({ files: 1, fileBytes: 1, reclaimableBytes: 5 })
        const usage = await store.usage()
        expect(usage).to.include({ files: m.files, used: m.fileBytes, reclaimable: m.reclaimableBytes })
        const parsed = parse((await scrape(dir)).text)
        expect(value(parsed, 'kfs_operations_total', { op: 'readFile' })).to.equal(2)
        expect(value(parsed, 'kfs_operations_total', { op: 'usage' })).to.equal(1)
        expect(value(parsed, 'kfs_files')).to.equal(1)
        expect(value(parsed, 'kfs_clients')).to.be.at.least(1) // the scrape's own connection
        // The holder gone, this process takes the store over: it counts from then on, and
        // counted none of the calls it made through the holder.
        await held.stop()
        expect(await store.exists('s')).to.equal(true)
        expect(store.heldBy).to.equal(process.pid)
        const own = await store.metrics()
        expect(own.operations.exists).to.deep.include({ count: 1 })
        for (const op of ['writeFile', 'readFile', 'createReadStream', 'createWriteStream', 'unlink', 'usage']) expect(own.operations[op].count, op).to.equal(0)
      } finally {
        await store.close()
      }
    } finally {
      await held.stop()
    }
  })

  it('a path of neither the protocol nor /metrics is EINVAL; a closed store\'s metrics() rejects ECLOSED', async () => {
    const store = t.open({ referenceId: REF, shardCount: 16 })
    await store.open()
    const bad = await scrape(store.location, '/metrics/x')
    expect(bad.status).to.equal(400)
    expect(JSON.parse(bad.text).error.code).to.equal('EINVAL')
    expect((await scrape(store.location, '/v1/metrics')).status).to.equal(400)
    await rejects(store.metrics(1), 'EINVAL')
    await store.close()
    await rejects(store.metrics(), 'ECLOSED')
  })
})

'use strict'

// What one scrape of a store's metrics costs the process that holds it: store.metrics(),
// and GET /metrics on its socket (the text, as Prometheus reads it), on a store of --files
// files in its 256 shards. Twice: with every shard open, then reopened with `openAhead`
// off, every shard closed (figures cached at their close: nothing opened). A scrape reads
// an open shard's disk bytes (its tables' size, and its logs listed: what usage() does)
// again once they are 5 s old (shard/shards.js, DISK_BYTES_AGE): the first scrape, which
// reads them all, is shown on its own. Per scrape, µs: median and quartiles of the time,
// and the CPU (user + system) of the process, the holder and, for GET /metrics, its
// client, over all scrapes divided by their number. The store is filled before the clock.

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const http = require('node:http')
const crypto = require('node:crypto')
const { cli, runScript, fmt, quickMark, inFlight, KiB } = require('../harness/script')
const { percentile } = require('../harness/stats')

const ROOT = path.join(__dirname, '..', '..')

const COMMAND = cli(__filename, {
  options: [
    { name: '--files', type: 'count', default: 20000, help: 'files in the store' },
    { name: '--runs', type: 'count', default: 200, help: 'scrapes of each kind, each way' },
    { name: '--dir', type: 'string', arg: 'DIR', default: process.env.KFS_PERF_DIR || os.tmpdir(), shown: '$KFS_PERF_DIR, else the temp dir', help: 'where the store goes: a new directory in it, removed at the end' },
    { name: '--quick', type: 'flag', sets: { files: 20, runs: 2, quick: true }, help: 'few files and runs, for the tests: proves the script runs, measures nothing' }
  ]
})

// GET /metrics on the store's socket; resolves to the text's length.
function scrape (dir) {
  return new Promise((resolve, reject) => {
    http.get({ socketPath: path.join(dir, 'kfs.sock'), path: '/metrics', agent: false }, (res) => {
      let bytes = 0
      res.on('data', (part) => { bytes += part.length })
      res.on('end', () => (res.statusCode === 200 ? resolve(bytes) : reject(new Error(`GET /metrics answered ${res.statusCode}`))))
      res.on('error', reject)
    }).on('error', reject)
  })
}

// `runs` calls of fn, one at a time: { us: [per call], cpu: µs of CPU per call }.
async function timed (runs, fn) {
  const us = []
  const cpu = process.cpuUsage()
  for (let i = 0; i < runs; i++) {
    const start = process.hrtime.bigint()
    await fn()
    us.push(Number(process.hrtime.bigint() - start) / 1e3)
  }
  const used = process.cpuUsage(cpu)
  return { us, cpu: (used.user + used.system) / runs }
}

const spread = (xs) => `${fmt(percentile(xs, 50))} (${fmt(percentile(xs, 25))}–${fmt(percentile(xs, 75))})`

async function measure (store, runs) {
  let m
  const rows = {
    'store.metrics(), the first': await timed(1, async () => { m = await store.metrics() }),
    'store.metrics()': await timed(runs, () => store.metrics()),
    'GET /metrics': await timed(runs, () => scrape(store.location))
  }
  return { rows, open: m.shardsOpen, shards: m.shards, files: m.files }
}

async function main (args) {
  const kfs = require(ROOT)
  fs.mkdirSync(args.dir, { recursive: true })
  const base = fs.mkdtempSync(path.join(args.dir, 'kfs-scrape-'))
  const dir = path.join(base, 'store')
  const results = []
  try {
    let store = kfs(dir, { create: true })
    const data = crypto.randomBytes(KiB)
    await inFlight(16, args.files, () => store.writeFile(crypto.randomBytes(32).toString('hex'), data))
    results.push(await measure(store, args.runs))
    await store.close()
    store = kfs(dir, { openAhead: false })
    await store.open()
    results.push(await measure(store, args.runs))
    await store.close()
  } finally {
    fs.rmSync(base, { recursive: true, force: true })
  }
  const lines = [
    `${fmt(args.runs)} scrapes of each kind each way, one at a time, on a store of ${fmt(args.files)} files of 1 KiB; per scrape, µs; load average at the end ${os.loadavg().map((x) => x.toFixed(2)).join(' ')}${args.quick ? `; ${quickMark('runs')}` : ''}`,
    '',
    '| shards open / made | scrape | time: median (quartiles) | CPU |',
    '|---|---|---:|---:|'
  ]
  for (const { rows, open, shards } of results) {
    for (const [name, { us, cpu }] of Object.entries(rows)) lines.push(`| ${open} / ${shards} | ${name} | ${spread(us)} | ${fmt(cpu)} |`)
  }
  process.stdout.write(lines.join('\n') + '\n')
}

runScript(COMMAND, { cases: {}, main, tee: true })

'use strict'

// Issue 45's target for expiry: 12 s after --pieces pieces of --size bytes expire on an
// idle store, the disk over the empty store is at most 10% of their bytes. The pieces are
// put with one expiry time, --lead seconds after the first put (the puts must end before
// it); then nothing is called but diskUsage(), once a second from the expiry on, which
// walks the store's directory. The store's own collection (lib/maintenance/expiry.js) and
// reclaiming (lib/maintenance/reclaimer.js) do all the work. The empty store's disk is
// measured first, once the store opened and made its shards ahead.

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const crypto = require('node:crypto')
const { cli, runScript, fmt, quickMark, inFlight, KiB } = require('../harness/script')

const ROOT = path.join(__dirname, '..', '..')

const COMMAND = cli(__filename, {
  options: [
    { name: '--pieces', type: 'count', default: 2000, help: 'pieces put, all expiring at once' },
    { name: '--size', type: 'size', arg: 'BYTES', default: 60 * KiB, help: 'a piece\'s size' },
    { name: '--lead', type: 'count', default: 15, help: 'seconds from the first put to the expiry' },
    { name: '--after', type: 'count', default: 12, help: 'seconds after the expiry the disk is judged' },
    { name: '--dir', type: 'string', arg: 'DIR', default: process.env.KFS_PERF_DIR || os.tmpdir(), shown: '$KFS_PERF_DIR, else the temp dir', help: 'where the store goes: a new directory in it, removed at the end' },
    { name: '--quick', type: 'flag', sets: { pieces: 20, lead: 2, after: 4, quick: true }, help: 'few pieces, for the tests: proves the script runs, measures nothing' }
  ]
})

const sleepUntil = (at) => new Promise((resolve) => setTimeout(resolve, Math.max(0, at - Date.now())))

async function main (args) {
  const kfs = require(ROOT)
  fs.mkdirSync(args.dir, { recursive: true })
  const base = fs.mkdtempSync(path.join(args.dir, 'kfs-expiry-'))
  const lines = []
  try {
    const store = kfs(path.join(base, 'store'), { create: true })
    await store.open()
    await sleepUntil(Date.now() + 2000) // the shards made ahead
    const empty = await store.diskUsage()
    const start = Date.now()
    const expires = start + args.lead * 1000
    await inFlight(8, args.pieces, () => store.put(crypto.randomBytes(args.size), { expires }))
    const written = Date.now()
    if (written >= expires) throw new Error(`the puts took ${written - start} ms, past the expiry: give a longer --lead`)
    const full = await store.diskUsage()
    const bytes = args.pieces * args.size
    const seen = []
    for (let s = 0; s <= args.after; s++) {
      await sleepUntil(expires + s * 1000)
      seen.push(await store.diskUsage() - empty)
    }
    const m = await store.metrics()
    await store.close()
    const over = seen[seen.length - 1]
    lines.push(
      `${fmt(args.pieces)} pieces of ${fmt(args.size)} bytes (${fmt(bytes)} bytes) put in ${fmt(written - start)} ms, all expiring ${args.lead} s after the first put; load average at the end ${os.loadavg().map((x) => x.toFixed(2)).join(' ')}${args.quick ? `; ${quickMark('pieces')}` : ''}`,
      '',
      `empty store on disk: ${fmt(empty)} bytes; with the pieces: ${fmt(full - empty)} over it`,
      `collected: ${fmt(m.expiries.files)} files in ${fmt(m.expiries.runs)} runs; files left ${fmt(m.files)}; reclaim runs ${fmt(m.reclaims.runs)}`,
      '',
      '| seconds after the expiry | disk over the empty store, bytes | % of the pieces\' bytes |',
      '|---:|---:|---:|',
      ...seen.map((b, s) => `| ${s} | ${fmt(b)} | ${(100 * b / bytes).toFixed(1)} |`),
      '',
      `target: at ${args.after} s, at most 10%: ${(100 * over / bytes).toFixed(1)}% (${over <= bytes / 10 ? 'met' : 'NOT met'})`
    )
  } finally {
    fs.rmSync(base, { recursive: true, force: true })
  }
  process.stdout.write(lines.join('\n') + '\n')
}

runScript(COMMAND, { cases: {}, main, tee: true })

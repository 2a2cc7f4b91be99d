'use strict'

// Issue 45's target for the trash: restoreTrash() of 10,000 pieces under 1 s. --pieces
// pieces of --size bytes are put, all trashed, then restoreTrash() is timed, --rounds
// times (each round trashes them all again; the store is the same). A restore sums the
// shards' trash figures and writes one synced record (lib/maintenance/trash.js): no file
// is written. Every piece is then checked to exist again, and unlinked, timed: trash()
// writes a piece's data again (it is in its head), which an unlink does not.

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const crypto = require('node:crypto')
const { cli, runScript, fmt, quickMark, inFlight } = require('../harness/script')
const { median } = require('../harness/stats')

const ROOT = path.join(__dirname, '..', '..')

const COMMAND = cli(__filename, {
  options: [
    { name: '--pieces', type: 'count', default: 10000, help: 'pieces put and trashed' },
    { name: '--size', type: 'size', arg: 'BYTES', default: 62068, help: 'a piece\'s size' },
    { name: '--rounds', type: 'count', default: 3, help: 'restores timed' },
    { name: '--dir', type: 'string', arg: 'DIR', default: process.env.KFS_PERF_DIR || os.tmpdir(), shown: '$KFS_PERF_DIR, else the temp dir', help: 'where the store goes: a new directory in it, removed at the end' },
    { name: '--quick', type: 'flag', sets: { pieces: 50, rounds: 1, quick: true }, help: 'few pieces, for the tests: proves the script runs, measures nothing' }
  ]
})

async function main (args) {
  const kfs = require(ROOT)
  fs.mkdirSync(args.dir, { recursive: true })
  const base = fs.mkdtempSync(path.join(args.dir, 'kfs-trash-'))
  const lines = []
  try {
    const store = kfs(path.join(base, 'store'), { create: true })
    await store.open()
    const keys = []
    await inFlight(8, args.pieces, async () => keys.push(await store.put(crypto.randomBytes(args.size))))
    const times = []
    let trashMs = 0
    for (let round = 0; round < args.rounds; round++) {
      const trashStart = performance.now()
      await inFlight(8, keys, (key) => store.trash(key))
      trashMs += performance.now() - trashStart
      const start = performance.now()
      const restored = await store.restoreTrash()
      times.push(performance.now() - start)
      if (restored.files !== keys.length) throw new Error(`restoreTrash() counted ${restored.files} files, ${keys.length} trashed`)
    }
    await inFlight(8, keys, async (key) => { if (!(await store.exists(key))) throw new Error(`${key} was not restored`) })
    const unlinkStart = performance.now()
    await inFlight(8, keys, (key) => store.unlink(key))
    const unlinkMs = performance.now() - unlinkStart
    await store.close()
    const ms = median(times)
    lines.push(
      `${fmt(args.pieces)} pieces of ${fmt(args.size)} bytes, trashed and restored ${args.rounds} times; trash() took ${fmt(Math.round(trashMs / args.rounds))} ms a round for all, 8 in flight; load average at the end ${os.loadavg().map((x) => x.toFixed(2)).join(' ')}${args.quick ? `; ${quickMark('pieces')}` : ''}`,
      '',
      `unlink() of them all, 8 in flight: ${fmt(Math.round(unlinkMs))} ms (trash() took ${(trashMs / args.rounds / unlinkMs).toFixed(2)}x as long)`,
      `restoreTrash(): ${times.map((t) => t.toFixed(1)).join(', ')} ms (median ${ms.toFixed(1)})`,
      `target: under 1,000 ms for 10,000 pieces: ${args.pieces >= 10000 ? (ms < 1000 ? 'met' : 'NOT met') : 'not judged (fewer pieces)'}`
    )
  } finally {
    fs.rmSync(base, { recursive: true, force: true })
  }
  process.stdout.write(lines.join('\n') + '\n')
}

runScript(COMMAND, { cases: {}, main, tee: true })

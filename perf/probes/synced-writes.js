'use strict'

// Synced writes (sync: true) by size: milliseconds per write, and the directory syncs
// of shards and the state per write (lib/leveldb/leveldb.js syncs one after a synced
// batch that may have gone into a log LevelDB has just started; a file's write is
// several batches, and the state's marks). In a store of one
// shard every write fills the same memtable, which is the most such writes can cost;
// in one of 256 shards, writes spread. With --compare DIR, the same cases run with the
// kfs at DIR (a worktree of another commit, say) side by side: each case in a process
// of its own, the two alternating, medians of the rounds. Also: the time to make a new
// store (open and close), which makes its state in tmp/ and syncs it into place.

const fs = require('node:fs')
const fsp = require('node:fs/promises')
const os = require('node:os')
const path = require('node:path')
const { inChild } = require('../harness/child')
const { cli, runScript, KiB, MiB } = require('../harness/script')
const { median } = require('../harness/stats')

const COMMAND = cli(__filename, {
  run: 'npm run perf:synced-writes --',
  options: [
    { name: '--sizes', type: 'list', of: 'size', default: [4 * KiB, 64 * KiB, MiB, 8 * MiB], shown: '4K,64K,1M,8M', help: 'write sizes' },
    { name: '--bytes', type: 'size', default: 64 * MiB, shown: '64M', help: 'bytes written per size and case' },
    { name: '--max-writes', type: 'count', default: 2000, help: 'at most this many writes per size and case' },
    { name: '--shards', type: 'list', of: 'count', default: [1, 256], help: 'shard counts of the stores' },
    { name: '--rounds', type: 'count', default: 3, help: 'rounds' },
    { name: '--compare', type: 'path', arg: 'DIR', help: 'also run the cases with the kfs at DIR, side by side' },
    { name: '--dir', type: 'string', arg: 'DIR', default: process.env.KFS_PERF_DIR || os.tmpdir(), shown: '$KFS_PERF_DIR, else the temp dir', help: 'where the data goes' }
  ]
})

// In the child: `count` synced writes of `size` bytes to 64 keys (new files, then
// overwrites); counts the syncs of database directories meanwhile (kfs makes them
// through fs.promises).
async function writes ({ kfs, dir, size, count, shards }) {
  let dirSyncs = 0
  let counting = false
  const open = fsp.open
  fsp.open = async (file, flags, ...rest) => {
    const handle = await open(file, flags, ...rest)
    // A database's directory (a shard's, the state's): those synced after writes, not
    // those of new shards and spares made in tmp/, nor the store's.
    if (flags === 'r' && /\/(\d{3}\.s|state)$/.test(file) && (await handle.stat()).isDirectory()) {
      const sync = handle.sync.bind(handle)
      handle.sync = () => { if (counting) dirSyncs++; return sync() }
    }
    return handle
  }
  const store = await require(kfs)(dir, { sync: true, shardCount: shards })
  try {
    const data = Buffer.alloc(size, 7)
    await store.open()
    counting = true
    const start = process.hrtime.bigint()
    for (let i = 0; i < count; i++) await store.writeFile(`key${i % 64}`, data)
    const ms = Number(process.hrtime.bigint() - start) / 1e6
    counting = false
    return { msPerWrite: ms / count, dirSyncs, count }
  } finally {
    await store.close()
    fsp.open = open
  }
}

// In the child: `count` new stores opened and closed, one after another.
async function creates ({ kfs, dir, count }) {
  const times = []
  for (let i = 0; i < count; i++) {
    const start = process.hrtime.bigint()
    const store = require(kfs)(path.join(dir, `s${i}`))
    await store.open()
    await store.close()
    times.push(Number(process.hrtime.bigint() - start) / 1e6)
  }
  return { ms: median(times) }
}

async function main (args) {
  const engines = [['this', path.join(__dirname, '..', '..')], ...(args.compare ? [['compared', args.compare]] : [])]
  const rows = []
  for (const shards of args.shards) {
    for (const size of args.sizes) {
      const count = Math.max(1, Math.min(args.maxWrites, Math.floor(args.bytes / size)))
      const runs = Object.fromEntries(engines.map(([name]) => [name, []]))
      for (let round = 0; round < args.rounds; round++) {
        for (const [name, kfs] of round % 2 ? [...engines].reverse() : engines) {
          const dir = fs.mkdtempSync(path.join(args.dir, 'kfs-synced-'))
          try {
            runs[name].push(await inChild(__filename, { name: 'writes', engine: name, kfs, dir: path.join(dir, 'store'), size, count, shards }))
          } finally {
            fs.rmSync(dir, { recursive: true, force: true })
          }
        }
      }
      const ms = (name) => median(runs[name].map((r) => r.msPerWrite))
      const synced = median(runs.this.map((r) => r.dirSyncs / r.count))
      const compared = args.compare ? median(runs.compared.map((r) => r.dirSyncs / r.count)) : undefined
      rows.push([size >= MiB ? `${size / MiB} MiB` : `${size / KiB} KiB`, shards, count, ms('this').toFixed(2), ...(args.compare ? [ms('compared').toFixed(2), (ms('this') / ms('compared')).toFixed(2)] : []), synced.toFixed(2), ...(args.compare ? [compared.toFixed(2)] : [])])
    }
  }
  const made = Object.fromEntries(engines.map(([name]) => [name, []]))
  for (let round = 0; round < args.rounds; round++) {
    for (const [name, kfs] of round % 2 ? [...engines].reverse() : engines) {
      const dir = fs.mkdtempSync(path.join(args.dir, 'kfs-creates-'))
      try {
        made[name].push((await inChild(__filename, { name: 'creates', engine: name, kfs, dir, count: 20 })).ms)
      } finally {
        fs.rmSync(dir, { recursive: true, force: true })
      }
    }
  }
  const head = ['size', 'shards', 'writes', 'ms/write', ...(args.compare ? ['compared', 'ratio'] : []), 'directory syncs/write', ...(args.compare ? ['compared'] : [])]
  console.log(`| ${head.join(' | ')} |`)
  console.log(`|${head.map(() => '---:').join('|')}|`)
  for (const row of rows) console.log(`| ${row.join(' | ')} |`)
  const createMs = (name) => median(made[name]).toFixed(1)
  console.log(`\na new store opened and closed: ${createMs('this')} ms${args.compare ? ` (compared: ${createMs('compared')} ms)` : ''}, median of 20 per round`)
  console.log(`medians of ${args.rounds} rounds, each case in a process of its own${args.compare ? `, compared: ${args.compare}` : ''}`)
}

runScript(COMMAND, { cases: { writes, creates }, main, tee: true })

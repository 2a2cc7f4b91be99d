'use strict'

// The `kfs` command on a store another process holds (lib/share/), against the same
// command on the store with no holder (it then opens the store itself): one large
// `kfs get` written to /dev/null, and many small `kfs put`s one after another, each a
// process of its own as an operator runs them. Each case is timed from the command's
// start to its exit; rounds alternate which of the two goes first. The holder is a
// process of its own that opens the store and waits.
//
// The piece workload with an operator beside it: `npm run benchmark:pieces -- --engines
// kfs,kfs-operator`.

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const crypto = require('node:crypto')
const { spawn } = require('node:child_process')
const { hold } = require('../harness/child')
const { cli, runScript, fmt, quickMark, MiB } = require('../harness/script')
const { median } = require('../harness/stats')

const ROOT = path.join(__dirname, '..', '..')
const CLI = path.join(ROOT, 'bin', 'kfs.js')

const COMMAND = cli(__filename, {
  options: [
    { name: '--size', type: 'size', arg: 'BYTES', default: 1024 * MiB, shown: '1G', help: 'the file `kfs get` reads' },
    { name: '--files', type: 'count', default: 200, help: 'small files, one `kfs put` each' },
    { name: '--file-size', type: 'size', arg: 'BYTES', default: 4096, shown: '4K', help: 'their size' },
    { name: '--rounds', type: 'count', default: 3, help: 'rounds' },
    { name: '--dir', type: 'string', arg: 'DIR', default: process.env.KFS_PERF_DIR || os.tmpdir(), shown: '$KFS_PERF_DIR, else the temp dir', help: 'where the store goes: a new directory in it, removed at the end' },
    { name: '--quick', type: 'flag', sets: { size: MiB, files: 3, fileSize: 100, rounds: 1, quick: true }, help: 'tiny sizes, for the tests: proves the script runs, measures nothing' }
  ]
})

// Runs the kfs command on the store; resolves to its milliseconds, start to exit.
function kfs (dir, args, { stdout = 'ignore' } = {}) {
  const start = process.hrtime.bigint()
  const child = spawn(process.execPath, [CLI, '-d', dir, ...args], { stdio: ['ignore', stdout, 'pipe'] })
  let stderr = ''
  child.stderr.on('data', (d) => { stderr += d })
  return new Promise((resolve, reject) => {
    child.once('error', reject)
    child.once('exit', (code) => {
      if (code !== 0) return reject(new Error(`kfs ${args.join(' ')} exited with ${code}: ${stderr.trim()}`))
      resolve(Number(process.hrtime.bigint() - start) / 1e6)
    })
  })
}

// Runs case(dir) with no holder and with one, in the order of the round.
async function sideBySide (dir, round, measure) {
  const result = {}
  for (const how of round % 2 ? ['holder', 'direct'] : ['direct', 'holder']) {
    const stop = how === 'holder' ? await hold(dir) : undefined
    try {
      result[how] = await measure()
    } finally {
      if (stop) await stop()
    }
  }
  return result
}

async function main (args) {
  fs.mkdirSync(args.dir, { recursive: true })
  const base = fs.mkdtempSync(path.join(args.dir, 'kfs-share-'))
  const store = path.join(base, 'store')
  const gets = []
  const puts = []
  try {
    const { bavail, bsize } = fs.statfsSync(base)
    const need = args.size + args.files * args.fileSize * args.rounds * 4 + 256 * MiB
    if (bavail * bsize < need) throw new Error(`${base} has ${fmt(bavail * bsize / MiB)} MiB free; this run needs about ${fmt(need / MiB)} MiB`)
    const big = path.join(base, 'big')
    fs.writeFileSync(big, crypto.randomBytes(Math.min(args.size, 64 * MiB)))
    while (fs.statSync(big).size < args.size) fs.appendFileSync(big, crypto.randomBytes(Math.min(args.size - fs.statSync(big).size, 64 * MiB)))
    await kfs(store, ['put', '--key', 'big', big])
    fs.rmSync(big)
    const small = path.join(base, 'small')
    fs.mkdirSync(small)
    for (let round = 0; round < args.rounds; round++) {
      process.stderr.write(`perf/probes/share.js: round ${round + 1}\n`)
      gets.push(await sideBySide(store, round, () => kfs(store, ['get', 'big', '/dev/null'])))
      puts.push(await sideBySide(store, round, async () => {
        let ms = 0
        for (let i = 0; i < args.files; i++) {
          const file = path.join(small, String(i))
          fs.writeFileSync(file, crypto.randomBytes(args.fileSize))
          ms += await kfs(store, ['put', file])
        }
        return ms
      }))
    }
  } finally {
    fs.rmSync(base, { recursive: true, force: true })
  }
  const rows = [
    [`\`kfs get\` of ${fmt(args.size / MiB)} MiB to /dev/null`, 'MiB/s', gets, (ms) => args.size / MiB / (ms / 1000)],
    [`\`kfs put\` of ${fmt(args.files)} files of ${fmt(args.fileSize)} bytes, one after another`, 'files/s', puts, (ms) => args.files / (ms / 1000)]
  ]
  const lines = [
    `${args.rounds} round${args.rounds === 1 ? '' : 's'}; medians; a ratio is the median of the rounds' ratios (through the holder / direct); load average at the end ${os.loadavg().map((x) => x.toFixed(2)).join(' ')}${args.quick ? `; ${quickMark('sizes')}` : ''}`,
    '',
    '| command | unit | direct | through the holder | ratio |',
    '|---|---|---:|---:|---:|'
  ]
  for (const [name, unit, runs, speed] of rows) {
    const direct = median(runs.map((r) => speed(r.direct)))
    const held = median(runs.map((r) => speed(r.holder)))
    const ratio = median(runs.map((r) => speed(r.holder) / speed(r.direct)))
    lines.push(`| ${name} | ${unit} | ${fmt(direct, 1)} | ${fmt(held, 1)} | ${fmt(ratio, 2)} |`)
  }
  process.stdout.write(lines.join('\n') + '\n')
}

runScript(COMMAND, { cases: {}, main, tee: true })

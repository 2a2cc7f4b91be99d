'use strict'

// Large files against plain files, each engine in a process of its own: `readFile` and
// a whole-file read stream of one file of each --sizes, hot (from the page cache). The
// engines: fs (fs.promises.readFile; fs.createReadStream with a 1 MiB highWaterMark),
// kfs (every chunk's CRC32 checked), kfs at --before CHECKOUT (a copy of the code before
// a change, on the same store), and the floor: the bare leveldown binding on the store's
// shard, doing what a checked read cannot do without: for readFile, one get per chunk,
// 8 in flight, each CRC32 checked and copied into one Buffer of the file's size; for a
// stream, the same gets without that Buffer, and an iterator (3 chunks a trip, as kfs's)
// checking the same CRC32s. The floor's process also times the parts: each of those
// without the CRC32s, and filling a new Buffer of the file's size (fs.readFile's own
// cost: a page fault for each of its pages). Each process reads each file once untimed,
// then --reps times each case, alternating. Rounds rotate which engine goes first; a
// ratio is taken within a round, and the figures are medians over rounds.

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const crypto = require('node:crypto')
const { inChild, now, msSince } = require('../harness/child')
const { cli, drain, runScript, fmt, MiB } = require('../harness/script')

const COMMAND = cli(__filename, {
  options: [
    { name: '--sizes', type: 'list', of: 'number', default: [128], help: 'file sizes, MiB' },
    { name: '--rounds', type: 'count', default: 3, help: 'rounds' },
    { name: '--reps', type: 'count', default: 3, help: 'repetitions of each case per process and round' },
    { name: '--dir', type: 'string', arg: 'DIR', default: process.env.KFS_PERF_DIR || os.tmpdir(), shown: '$KFS_PERF_DIR, else the temp dir', help: 'where the data goes' },
    { name: '--before', type: 'path', arg: 'CHECKOUT', help: 'also run the kfs cases on the kfs at CHECKOUT' }
  ]
})

const keyOf = (size) => crypto.createHash('sha256').update(`large-files ${size}`).digest('hex')

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b)
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2
}

async function timed (fn) {
  const start = now()
  await fn()
  return msSince(start)
}

// Runs every case once untimed, then `reps` times each, the order alternating: { case: [ms] }.
async function repeat (cases, reps) {
  for (const fn of Object.values(cases)) await fn()
  const times = {}
  for (let rep = 0; rep < reps; rep++) {
    const names = Object.keys(cases)
    for (const name of rep % 2 ? names.reverse() : names) (times[name] = times[name] || []).push(await timed(cases[name]))
  }
  return times
}

// The same bytes for every engine: MiB `i` of file `size` (its first 4 bytes the index).
function piece (seed, i) {
  seed.writeUInt32LE(i, 0)
  return Buffer.from(seed)
}

const cases = {
  // Writes each file into a store and as a plain file, then closes the store: { shardDirs }.
  async setup ({ dir, sizes }) {
    const kfs = require('../..')
    const store = kfs(path.join(dir, 'store'))
    const seed = crypto.randomBytes(MiB)
    for (const size of sizes) {
      const ws = store.createWriteStream(keyOf(size))
      const fd = fs.openSync(path.join(dir, `plain-${size}`), 'w')
      for (let i = 0; i < size; i++) {
        const data = piece(seed, i)
        fs.writeSync(fd, data)
        if (!ws.write(data)) await new Promise((resolve) => ws.once('drain', resolve))
      }
      fs.closeSync(fd)
      ws.end()
      await new Promise((resolve, reject) => ws.once('finish', resolve).once('error', reject))
    }
    await store.compact()
    await store.close()
    return {}
  },

  async fs ({ dir, size, reps }) {
    const file = path.join(dir, `plain-${size}`)
    return repeat({
      readFile: () => fs.promises.readFile(file),
      stream: () => drain(fs.createReadStream(file, { highWaterMark: MiB }))
    }, reps)
  },

  async kfs ({ dir, size, reps, checkout = path.join(__dirname, '..', '..') }) {
    const store = require(checkout)(path.join(dir, 'store'))
    const key = keyOf(size)
    const times = await repeat({
      readFile: async () => {
        const data = await store.readFile(key)
        if (data.length !== size * MiB) throw new Error(`read ${data.length} bytes`)
      },
      stream: () => drain(store.createReadStream(key))
    }, reps)
    await store.close()
    return times
  },

  // The bare binding on the file's shard, with kfs's LevelDB options.
  async floor ({ dir, size, reps }) {
    const leveldown = require('leveldown')
    const { DEFAULTS } = require('../../lib/leveldb/leveldb')
    const { intact } = require('../../lib/shard/chunk-record')
    const key = keyOf(size)
    const call = (fn) => new Promise((resolve, reject) => fn((err, r) => (err ? reject(err) : resolve(r))))
    const storeDir = path.join(dir, 'store')
    const keys = []
    let db
    for (const shard of fs.readdirSync(storeDir).filter((name) => name.endsWith('.s'))) {
      db = leveldown(path.join(storeDir, shard))
      await call((cb) => db.open({ ...DEFAULTS, createIfMissing: false }, cb))
      await scan(db, { gt: `${key} `, lt: `${key} ~`, values: false }, (k) => keys.push(k))
      if (keys.length) break
      await call((cb) => db.close(cb))
    }
    const chunkSize = (size * MiB) / keys.length
    if (!Number.isInteger(chunkSize)) throw new Error(`found ${keys.length} chunks of ${key}`)
    const check = (k, value) => {
      if (!intact(k, value)) throw new Error(`${k}: bad CRC32`)
    }
    // One get per chunk, `inFlight` at once, each handed to each(value, index) as it comes.
    const gets = async (inFlight, each) => {
      let next = 0
      await Promise.all(Array.from({ length: inFlight }, async () => {
        while (next < keys.length) {
          const i = next++
          each(await call((cb) => db.get(keys[i], { asBuffer: true, fillCache: false }, cb)), i)
        }
      }))
    }
    const times = await repeat({
      'a new Buffer of the file\'s size, filled': async () => Buffer.allocUnsafe(size * MiB).fill(1),
      'readFile: gets + copy': () => {
        const out = Buffer.allocUnsafe(size * MiB)
        return gets(8, (value, i) => value.copy(out, i * chunkSize, 4))
      },
      'readFile: gets + CRC32 + copy': () => {
        const out = Buffer.allocUnsafe(size * MiB)
        return gets(8, (value, i) => {
          check(keys[i], value)
          value.copy(out, i * chunkSize, 4)
        })
      },
      'stream: gets': () => gets(8, () => {}),
      'stream: gets + CRC32': () => gets(8, (value, i) => check(keys[i], value)),
      'stream: iterator': () => scan(db, { gte: keys[0], lte: keys[keys.length - 1], highWaterMark: 2.5 * chunkSize }, () => {}),
      'stream: iterator + CRC32': () => scan(db, { gte: keys[0], lte: keys[keys.length - 1], highWaterMark: 2.5 * chunkSize }, check)
    }, reps)
    await call((cb) => db.close(cb))
    return times
  }
}

// each(key, value) for every entry of db.iterator(options).
function scan (db, options, each) {
  return new Promise((resolve, reject) => {
    const it = db.iterator({ keyAsBuffer: false, valueAsBuffer: true, fillCache: false, ...options })
    const step = () => it.next((err, key, value) => {
      if (err) return reject(err)
      if (key === undefined) return it.end(() => resolve())
      try {
        each(key, value)
      } catch (e) {
        return it.end(() => reject(e))
      }
      step()
    })
    step()
  })
}

async function main (args) {
  fs.mkdirSync(args.dir, { recursive: true })
  const dir = fs.mkdtempSync(path.join(args.dir, 'kfs-large-files-'))
  const total = args.sizes.reduce((a, b) => a + b, 0)
  const { bavail, bsize } = fs.statfsSync(dir)
  if (bavail * bsize < total * MiB * 3) throw new Error(`${dir} has too little free space for ${total} MiB twice`)
  const script = __filename
  try {
    await inChild(script, { name: 'setup', dir, sizes: args.sizes })
    const rates = {} // `${size} ${engine} ${case}` -> [MiB/s, one per round]
    for (let round = 0; round < args.rounds; round++) {
      for (const size of args.sizes) {
        const engines = ['fs', 'kfs', 'floor', ...(args.before ? ['before'] : [])]
        for (let turn = 0; turn < round % engines.length; turn++) engines.push(engines.shift())
        for (const engine of engines) {
          const job = { name: engine === 'before' ? 'kfs' : engine, engine, dir, size, reps: args.reps, checkout: engine === 'before' ? args.before : undefined }
          const times = await inChild(script, job)
          for (const [name, ts] of Object.entries(times)) (rates[`${size} ${engine} ${name}`] = rates[`${size} ${engine} ${name}`] || []).push(size / (median(ts) / 1000))
        }
      }
    }
    console.log(`node ${process.version}, ${os.cpus().length} cpus, load ${os.loadavg().map((l) => l.toFixed(1)).join(' ')}; ${args.rounds} rounds of ${args.reps} reps per process`)
    console.log('')
    console.log('| size | engine | case | MiB/s, median of rounds | spread |')
    console.log('|---|---|---|---|---|')
    for (const label of Object.keys(rates)) {
      const [size, engine, ...name] = label.split(' ')
      const rs = rates[label]
      console.log(`| ${size} MiB | ${engine} | ${name.join(' ')} | ${fmt(median(rs))} | ${fmt(Math.min(...rs))}-${fmt(Math.max(...rs))} |`)
    }
    console.log('')
    for (const size of args.sizes) {
      const ratio = (a, b) => {
        const rs = rates[`${size} ${a}`].map((x, i) => x / rates[`${size} ${b}`][i])
        return `${fmt(median(rs), 2)} (${fmt(Math.min(...rs), 2)}-${fmt(Math.max(...rs), 2)})`
      }
      console.log(`${size} MiB readFile: kfs / fs ${ratio('kfs readFile', 'fs readFile')} (target >= 0.9); floor / fs ${ratio('floor readFile: gets + CRC32 + copy', 'fs readFile')}; kfs / floor ${ratio('kfs readFile', 'floor readFile: gets + CRC32 + copy')}`)
      console.log(`${size} MiB read stream: kfs / fs ${ratio('kfs stream', 'fs stream')} (target >= 0.8); floor / fs: gets ${ratio('floor stream: gets + CRC32', 'fs stream')}, iterator ${ratio('floor stream: iterator + CRC32', 'fs stream')}; kfs / floor (gets) ${ratio('kfs stream', 'floor stream: gets + CRC32')}`)
      const ms = (label) => fmt(size * 1000 / median(rates[`${size} floor ${label}`]))
      console.log(`${size} MiB, the parts (ms, medians of rounds): a new Buffer filled ${ms('a new Buffer of the file\'s size, filled')}; gets ${ms('stream: gets')}, with CRC32s ${ms('stream: gets + CRC32')}, with copies into one Buffer ${ms('readFile: gets + copy')}, with both ${ms('readFile: gets + CRC32 + copy')}; iterator ${ms('stream: iterator')}, with CRC32s ${ms('stream: iterator + CRC32')}; fs readFile ${fmt(size * 1000 / median(rates[`${size} fs readFile`]))}, kfs readFile ${fmt(size * 1000 / median(rates[`${size} kfs readFile`]))}, fs stream ${fmt(size * 1000 / median(rates[`${size} fs stream`]))}, kfs stream ${fmt(size * 1000 / median(rates[`${size} kfs stream`]))}`)
      if (args.before) console.log(`${size} MiB kfs / before: readFile ${ratio('kfs readFile', 'before readFile')}, stream ${ratio('kfs stream', 'before stream')}`)
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

runScript(COMMAND, { cases, main, tee: true })

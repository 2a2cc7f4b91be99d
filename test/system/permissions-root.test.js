'use strict'

// Stores that this user may not create or write, opened by the library and the command
// line as other users (root runs kfs as uids 12345 and 23456): each failure says, in
// kfs's words, which directory or whose store, never only the step that met it.
const { expect } = require('chai')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { spawnSync } = require('node:child_process')
const { scaled } = require('../helpers')
const { BIN } = require('../cli-harness')

const KFS = path.join(__dirname, '..', '..')
const OWNER = 12345
const OTHER = 23456

// Runs `script` (its arguments in argv) in a process of user `uid`; resolves to what it
// printed as JSON.
function as (uid, script, ...args) {
  const r = spawnSync(process.execPath, ['-e', `const kfs = require(${JSON.stringify(KFS)}); (async () => { ${script} })().then((out) => console.log(JSON.stringify(out ?? null)), (err) => console.log(JSON.stringify({ code: err.code, message: err.message, owner: err.owner, shard: err.shard, stack: err.stack })))`, ...args], { uid, gid: uid, encoding: 'utf8', timeout: scaled(30000) })
  expect(r.status, r.stderr).to.equal(0)
  return JSON.parse(r.stdout)
}

// The kfs command as user `uid`.
function cli (uid, dir, args, input) {
  return spawnSync(process.execPath, [BIN, '-d', dir, ...args], { uid, gid: uid, input, encoding: 'utf8', env: { ...process.env, KFS_DEBUG: '' }, timeout: scaled(30000) })
}

// The stores of these scripts make only the shards they write (openAhead false): the tests
// are about which user made which file.
const OPEN = 'return kfs(process.argv[1], { readOnly: process.argv[2] === "ro" }).open()'
const READ = 'const s = kfs(process.argv[1], { readOnly: process.argv[2] === "ro", openAhead: false }); try { return String(await s.readFile(process.argv[3])) } finally { await s.close() }'
const MAKE = 'const s = kfs(process.argv[1], { openAhead: false }); await s.open(); await s.close()'
const WRITE = 'const s = kfs(process.argv[1], { openAhead: false }); await s.writeFile(process.argv[2], process.argv[3]); await s.close()'

describe('stores this user may not create or write', function () {
  this.timeout(scaled(60000))
  let base
  before(function () {
    if (typeof process.getuid !== 'function' || process.getuid() !== 0) {
      console.log('      skipped: not running as root (running kfs as other users needs it)')
      return this.skip()
    }
  })
  beforeEach(() => {
    base = fs.mkdtempSync(path.join(os.tmpdir(), 'kfs-owners-'))
    fs.chmodSync(base, 0o777) // every user makes stores here
  })
  afterEach(() => {
    if (base) fs.rmSync(base, { recursive: true, force: true })
  })

  it('a store under a directory this user cannot write: EACCES naming the directory kfs could not create and why; the command prints it as one line, exit 1', () => {
    const parent = path.join(base, 'locked')
    fs.mkdirSync(parent, { mode: 0o555 })
    fs.chmodSync(parent, 0o555)
    for (const [dir, made] of [[path.join(parent, 'store'), path.join(parent, 'store')], [path.join(parent, 'a', 'store'), path.join(parent, 'a')]]) {
      const message = `the store at ${dir} could not be created: kfs could not create the directory ${made}: permission denied: this process (user ${OWNER}) may not write in ${parent}`
      expect(as(OWNER, OPEN, dir)).to.deep.include({ code: 'EACCES', message })
      const put = cli(OWNER, dir, ['put'], 'data')
      expect(put.status).to.equal(1)
      expect(put.stderr).to.equal(`kfs: ${message}\n`)
      const json = cli(OWNER, dir, ['put', '--json'], 'data')
      expect(json.status).to.equal(1)
      expect(JSON.parse(json.stderr).error).to.include({ code: 'EACCES', message, path: dir })
    }
    expect(fs.readdirSync(parent)).to.deep.equal([])
  })

  // Linux refuses a hard link to another user's file (fs.protected_hardlinks): the log
  // guard's link of a log that holds writes met it first (EPERM), LevelDB's LOCK
  // otherwise (EACCES).
  for (const log of ['empty', 'holding writes']) {
    it(`another user's store, its state's log ${log}: EACCES saying whose it is; read-only opens read it`, () => {
      const dir = path.join(base, 'store')
      expect(as(OWNER, log === 'empty' ? MAKE : WRITE, dir, 'k', 'data')).to.equal(null)
      const logs = fs.readdirSync(path.join(dir, 'state')).filter((f) => f.endsWith('.log'))
      expect(logs.some((f) => fs.statSync(path.join(dir, 'state', f)).size > 0)).to.equal(log !== 'empty')
      const err = as(OTHER, OPEN, dir)
      expect(err).to.deep.include({
        code: 'EACCES',
        owner: OWNER,
        message: `the store at ${dir} belongs to user ${OWNER}, and this process (user ${OTHER}) cannot write it: open it as that user, or open it for reads with the option readOnly: true`
      })
      if (log === 'empty') return // no file to read
      expect(as(OTHER, READ, dir, 'ro', 'k')).to.equal('data')
      const put = cli(OTHER, dir, ['put'], 'more')
      expect(put.status).to.equal(1)
      expect(put.stderr).to.equal(`kfs: the store at ${dir} cannot be written (permission denied: it belongs to user ${OWNER}): kfs put would change it; get, exists, stat, list and verify read it\n`)
      expect(cli(OTHER, dir, ['get', 'k']).stdout).to.equal('data')
    })
  }

  it('another user\'s store this user cannot even read: EACCES saying whose it is, read-only too', () => {
    const dir = path.join(base, 'store')
    expect(as(OWNER, WRITE, dir, 'k', 'data')).to.equal(null)
    fs.chmodSync(dir, 0o700)
    for (const mode of ['', 'ro']) {
      expect(as(OTHER, OPEN, dir, mode), mode).to.deep.include({
        code: 'EACCES',
        owner: OWNER,
        message: `the store at ${dir} belongs to user ${OWNER}, and this process (user ${OTHER}) cannot read it: open it as that user`
      })
    }
  })

  it('files root made in a user\'s store: EACCES naming the file and its owner, for the state and for a shard', () => {
    const dir = path.join(base, 'store')
    expect(as(OWNER, WRITE, dir, 'k', 'data')).to.equal(null)
    const shardsBefore = fs.readdirSync(dir).filter((f) => f.endsWith('.s'))
    expect(as(0, WRITE, dir, 'root\'s', 'more')).to.equal(null)
    const state = path.join(dir, 'state')
    const rootLog = fs.readdirSync(state).find((f) => f.endsWith('.log') && fs.statSync(path.join(state, f)).uid === 0 && fs.statSync(path.join(state, f)).size > 0)
    expect(rootLog, 'a log of root\'s holding writes').to.be.a('string')
    const err = as(OWNER, OPEN, dir)
    expect(err).to.deep.include({
      code: 'EACCES',
      owner: 0,
      message: `${path.join(state, rootLog)}, in the store at ${dir}, belongs to user 0, and this process (user ${OWNER}) cannot write it: give it back to the store's owner (chown), or open it for reads with the option readOnly: true`
    })
    // The state given back; a shard root made stays root's.
    const rootShard = fs.readdirSync(dir).find((f) => f.endsWith('.s') && !shardsBefore.includes(f))
    expect(rootShard, 'a shard root made').to.be.a('string')
    for (const entry of fs.readdirSync(dir).filter((f) => f !== rootShard)) spawnSync('chown', ['-R', `${OWNER}:${OWNER}`, path.join(dir, entry)])
    expect(as(OWNER, READ, dir, '', 'k')).to.equal('data')
    expect(as(OWNER, READ, dir, '', 'root\'s')).to.deep.include({
      code: 'EACCES',
      owner: 0,
      shard: Number(rootShard.slice(0, 3)),
      message: `${path.join(dir, rootShard)}, in the store at ${dir}, belongs to user 0, and this process (user ${OWNER}) cannot write it: give it back to the store's owner (chown), or open it for reads with the option readOnly: true`
    })
  })
})

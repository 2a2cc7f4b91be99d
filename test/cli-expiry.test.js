'use strict'

const { expect } = require('chai')
const fs = require('node:fs')
const { scaled, sha256 } = require('./helpers')
const { useCli } = require('./cli-harness')
const { holder } = require('./share-harness')
const { timeOf } = require('../lib/cli/when')

const HOUR = 60 * 60 * 1000

// The rows of `kfs stat KEY`: { name: value }.
const rowsOf = (stdout) => Object.fromEntries(stdout.toString().trim().split('\n').map((line) => line.split(/^(\S+) +/).slice(1)))

// Resolves once the clock is past `time` (ms).
const until = (time) => new Promise((resolve) => setTimeout(resolve, Math.max(0, time - Date.now() + 50)))

describe('kfs put --expires and stat\'s expiry', function () {
  this.timeout(scaled(60000))
  const c = useCli()
  const { cli, file } = c

  // `kfs put ...args` with `input`; resolves to { key, before, after }: the clock read
  // before it started and after it ended, between which a duration was counted from.
  async function put (args, input) {
    const before = Date.now()
    const r = await cli(['put', ...args], { input })
    expect(r, args.join(' ')).to.include({ code: 0, stderr: '' })
    return { key: r.stdout.toString().trim(), before, after: Date.now() }
  }

  const expiresOf = async (key) => JSON.parse((await cli(['stat', '--json', key])).stdout).expires

  describe('the times it takes', () => {
    it('a duration (s, m, h, d) counts from now; a date is ISO 8601, midnight UTC alone, else with its offset', () => {
      const now = Date.UTC(2030, 0, 1)
      expect(timeOf('30s', 1, now).getTime()).to.equal(now + 30000)
      expect(timeOf('15m', 1, now).getTime()).to.equal(now + 15 * 60000)
      expect(timeOf('1h', 1, now).getTime()).to.equal(now + HOUR)
      expect(timeOf('7d', 1, now).getTime()).to.equal(now + 7 * 24 * HOUR)
      expect(timeOf('0s', 1, now).getTime()).to.equal(now)
      expect(timeOf('7d', -1, now).getTime()).to.equal(now - 7 * 24 * HOUR)
      expect(timeOf('2030-06-01', 1, now).toISOString()).to.equal('2030-06-01T00:00:00.000Z')
      expect(timeOf('2030-06-01T10:00:00Z', 1, now).toISOString()).to.equal('2030-06-01T10:00:00.000Z')
      expect(timeOf('2030-06-01T10:00:00.5+02:00', 1, now).toISOString()).to.equal('2030-06-01T08:00:00.500Z')
      expect(timeOf('2028-02-29', 1, now).toISOString()).to.equal('2028-02-29T00:00:00.000Z')
      // A time without an offset is local time, as Date reads it.
      expect(timeOf('2030-06-01T10:00', 1, now).getTime()).to.equal(new Date(2030, 5, 1, 10, 0).getTime())
    })

    it('anything else is refused, naming the shapes it takes', () => {
      const bad = ['', '1', 'h', '1x', '1H', '1.5h', '-1h', ' 1h', '1h30m', '1 h', 'P1D', 'tomorrow', '2030-02-29', '2030-02-30', '2030-13-01',
        '2030-00-10', '2030-06-00', '2030-06-01T24:00', '2030-06-01T10:60', '2030-06-01 10:00', '2030-6-1', '30-06-01', 'Jun 1 2030', '1780000000000']
      for (const value of bad) expect(() => timeOf(value, 1), JSON.stringify(value)).to.throw(RangeError, /^must be a duration such as 30s, 15m, 1h or 7d, or a date such as /)
      expect(() => timeOf('99999999999d', 1)).to.throw(RangeError, 'is beyond the times a date can hold')
    })
  })

  it('stores the expiry through each way put writes: standard input, --key, and a file hashed first', async () => {
    const stdin = await put(['--expires', '1h'], 'from stdin\n')
    await put(['--key', 'named', '--expires', '2030-06-01T10:00:00+02:00'], 'named\n')
    const hashed = await put(['--expires', '2030-06-01', file('f.txt', 'a file\n')])
    expect(hashed.key).to.equal(sha256('a file\n'))
    const time = new Date(await expiresOf(stdin.key)).getTime()
    expect(time).to.be.within(stdin.before + HOUR, stdin.after + HOUR)
    expect(await expiresOf('named')).to.equal('2030-06-01T08:00:00.000Z')
    expect(await expiresOf(hashed.key)).to.equal('2030-06-01T00:00:00.000Z')
    expect(rowsOf((await cli(['stat', hashed.key])).stdout).expires).to.equal('2030-06-01T00:00:00.000Z')
  })

  it('stat shows "never" for a file without an expiry, and --json leaves expires out', async () => {
    const { key } = await put([], 'kept\n')
    const rows = rowsOf((await cli(['stat', key])).stdout)
    expect(rows).to.include({ key, expires: 'never' })
    expect(JSON.parse((await cli(['stat', '--json', key])).stdout)).to.not.have.property('expires')
  })

  it('put of content already stored replaces its expiry, as the library\'s put does: added, changed, removed', async () => {
    const f = file('same.txt', 'the same content\n')
    const { key } = await put([f])
    await put(['--expires', '2030-06-01', f])
    expect(await expiresOf(key)).to.equal('2030-06-01T00:00:00.000Z')
    await put(['--expires', '2031-06-01', f])
    expect(await expiresOf(key)).to.equal('2031-06-01T00:00:00.000Z')
    await put([f])
    expect(await expiresOf(key)).to.equal(undefined)
  })

  it('after its expiry, get is exit 1 with the missing-file message, exists false, list leaves it out', async () => {
    const { key, after } = await put(['--expires', '2s'], 'short-lived\n')
    const kept = await put([], 'kept\n')
    await until(after + 2000)
    const got = await cli(['get', key])
    expect(got).to.include({ code: 1, stderr: `kfs: no file with key ${key}\n` })
    expect(got.stdout.length).to.equal(0)
    expect(await cli(['exists', key])).to.include({ code: 1 })
    expect((await cli(['stat', key])).code).to.equal(1)
    expect((await cli(['list'])).stdout.toString()).to.equal(`${kept.key}\t5\t\n`)
  })

  it('a time not in the future is stored expired, with a warning: the file is never found', async () => {
    const r = await cli(['put', '--key', 'old', '--expires', '2020-01-01'], { input: 'old\n' })
    expect(r.code).to.equal(0)
    expect(r.stderr).to.equal('kfs: warning: --expires 2020-01-01T00:00:00.000Z is not in the future: the file is stored expired, and no reader finds it\n')
    expect(await cli(['get', 'old'])).to.include({ code: 1, stderr: 'kfs: no file named "old" (key ' + r.stdout.toString().trim() + ')\n' })
  })

  it('a bad --expires is a usage error, exit 2, one kfs: line, before anything is created', async () => {
    const shapes = 'must be a duration such as 30s, 15m, 1h or 7d, or a date such as 2026-12-01 or 2026-12-01T10:00:00Z'
    const cases = {
      '1x': shapes,
      '2030-02-30': shapes,
      '-1h': shapes,
      '': shapes,
      '99999999999d': 'is beyond the times a date can hold',
      '2300-01-01': 'must be at most 2286-11-20T17:46:39.999Z, the latest expiry a store takes'
    }
    for (const [value, why] of Object.entries(cases)) {
      const r = await cli(['put', '--expires', value, file('x.txt', 'x')])
      expect(r, value).to.include({ code: 2, stderr: `kfs: option '--expires <when>' argument '${value}' is invalid. ${why}; see 'kfs put --help'\n` })
    }
    const r = await cli(['put', '--expires'], { input: 'x' })
    expect(r).to.include({ code: 2, stderr: "kfs: option '--expires <when>' argument missing; see 'kfs put --help'\n" })
    expect(fs.existsSync(c.db)).to.equal(false)
  })

  it('through the process holding the store: put --expires, then stat shows it', async () => {
    await put([], 'makes the store\n')
    const held = await holder(c.db)
    try {
      await put(['--key', 'held', '--expires', '2030-06-01'], 'held\n')
      expect(rowsOf((await cli(['stat', 'held'])).stdout).expires).to.equal('2030-06-01T00:00:00.000Z')
    } finally {
      await held.stop()
    }
  })
})

'use strict'

// Opening never writes before it has decided (issue "Correct under every fault", item 5).
const { expect } = require('chai')
const fs = require('node:fs')
const path = require('node:path')
const crypto = require('node:crypto')
const kfs = require('..')
const { useTmp, rejects } = require('./helpers')

// Every file under dir with its content hash and mtime: any write shows.
function snapshot (dir) {
  const out = {}
  for (const entry of fs.readdirSync(dir, { withFileTypes: true, recursive: true })) {
    const full = path.join(entry.parentPath ?? entry.path, entry.name)
    const stat = fs.statSync(full)
    out[path.relative(dir, full)] = entry.isDirectory() ? 'dir' : `${crypto.createHash('sha256').update(fs.readFileSync(full)).digest('hex')} ${stat.mtimeMs}`
  }
  return out
}

describe('opening a store', () => {
  const t = useTmp()

  async function existingStore (options) {
    const store = t.open(options)
    await store.writeFile('a', 'kept')
    await store.close()
    return store.location
  }

  async function refusedUntouched (dir, options, code) {
    const before = snapshot(dir)
    await new Promise((resolve) => setTimeout(resolve, 20)) // a rewrite would change mtimes
    const err = await rejects(kfs(dir, options).open(), code)
    expect(snapshot(dir)).to.deep.equal(before)
    return err
  }

  // A power cut while an earlier kfs made the state in place could leave it naming an
  // empty manifest, or without CURRENT; format.json comes after the state.
  it('a store whose creation was cut off, its state half-made, is ECORRUPT saying what to do, and nothing is removed; a state missing from a store is made', async () => {
    for (const halfMade of ['no CURRENT', 'an empty manifest']) {
      const dir = path.join(t.dir, halfMade.replace(/ /g, '-'))
      fs.mkdirSync(path.join(dir, 'state'), { recursive: true })
      fs.writeFileSync(path.join(dir, 'state', 'LOCK'), '')
      if (halfMade === 'an empty manifest') {
        fs.writeFileSync(path.join(dir, 'state', 'MANIFEST-000001'), '')
        fs.writeFileSync(path.join(dir, 'state', 'CURRENT'), 'MANIFEST-000001\n')
      }
      // LevelDB's own text log, which any open attempt starts, aside.
      const files = () => Object.entries(snapshot(dir)).filter(([name]) => !/\/LOG(\.old)?$/.test(name))
      const before = files()
      const err = await rejects(kfs(dir).open(), 'ECORRUPT')
      expect(err.message).to.match(/never fully created \(it has no format\.json\).*remove its state directory and open it again/)
      expect(files()).to.deep.equal(before)
      fs.rmSync(path.join(dir, 'state'), { recursive: true })
      const store = kfs(dir)
      await store.writeFile('a', 'made')
      expect(String(await store.readFile('a'))).to.equal('made')
      await store.close()
    }
    const dir = path.join(t.dir, 'made')
    const made = kfs(dir)
    await made.open()
    await made.close()
    fs.rmSync(path.join(dir, 'state', 'CURRENT'))
    expect((await rejects(kfs(dir).open(), 'ECORRUPT')).message).to.not.match(/never fully created/)
  })

  it('refuses a store made by a newer kfs with ENOTSUP, writing nothing', async () => {
    const dir = await existingStore()
    const file = path.join(dir, 'format.json')
    fs.writeFileSync(file, JSON.stringify({ ...JSON.parse(fs.readFileSync(file, 'utf8')), format: 99 }))
    const err = await refusedUntouched(dir, undefined, 'ENOTSUP')
    expect(err.message).to.contain('newer kfs').and.to.contain('format 99')
    expect(err).to.include({ found: 99 })
  })

  it('refuses a garbage format.json with ECORRUPT, writing nothing', async () => {
    const dir = await existingStore()
    fs.writeFileSync(path.join(dir, 'format.json'), '{ garbage')
    await refusedUntouched(dir, undefined, 'ECORRUPT')
  })

  it('refuses options that contradict the store with EINVAL, writing nothing', async () => {
    const dir = await existingStore({ chunkSize: 4096 })
    const err = await refusedUntouched(dir, { chunkSize: 8192 }, 'EINVAL')
    expect(err.message).to.contain('chunkSize')
    await refusedUntouched(dir, { referenceId: 'ab'.repeat(20) }, 'EINVAL')
    expect((await t.open().readFile('a')).toString()).to.equal('kept')
  })

  describe('create: false', () => {
    it('fails with ENOENT naming a directory that does not exist, and does not create it', async () => {
      const dir = path.join(t.dir, 'not-there')
      const err = await rejects(kfs(dir, { create: false }).stat('x'), 'ENOENT')
      expect(err.message).to.contain(dir)
      expect(err.path).to.equal(dir)
      expect(fs.existsSync(dir)).to.equal(false)
    })

    it('fails with ENOENT on an empty directory, leaving it empty', async () => {
      const dir = path.join(t.dir, 'empty')
      fs.mkdirSync(dir)
      await rejects(kfs(dir, { create: false }).open(), 'ENOENT')
      expect(fs.readdirSync(dir)).to.deep.equal([])
    })

    it('opens an existing store', async () => {
      const dir = await existingStore()
      const store = kfs(dir, { create: false })
      t.stores.push(store)
      expect((await store.readFile('a')).toString()).to.equal('kept')
    })

    it('must be a boolean', async () => {
      expect(() => kfs(t.dir, { create: 'no' })).to.throw(TypeError).with.property('code', 'EINVAL')
    })
  })
})

'use strict'

// The test of test/share.test.js that needs root, to give a file to another user.
const { expect } = require('chai')
const fs = require('node:fs')
const path = require('node:path')
const net = require('node:net')
const { once } = require('node:events')
const kfs = require('../..')
const { useTmp, scaled } = require('../helpers')

describe('one store, many processes', function () {
  this.timeout(scaled(60000))
  const t = useTmp()

  it('a socket whose owner is another user: the holder replaces it', async function () {
    if (process.getuid() !== 0) this.skip() // needs root to give a file to another user
    const dir = path.join(t.dir, 'store')
    const alone = kfs(dir, { share: false })
    await alone.open()
    await alone.close()
    const planted = net.createServer(() => {}).listen(path.join(dir, 'kfs.sock'))
    await once(planted, 'listening')
    try {
      fs.chownSync(path.join(dir, 'kfs.sock'), 65534, 65534)
      const store = kfs(dir)
      await store.writeFile('a', 'b')
      const socket = fs.statSync(path.join(dir, 'kfs.sock'))
      expect(socket.uid).to.equal(process.getuid())
      expect(socket.mode & 0o777).to.equal(0o600)
      const reader = kfs(dir)
      expect(String(await reader.readFile('a'))).to.equal('b')
      expect(reader.heldBy).to.equal(process.pid)
      await reader.close()
      await store.close()
    } finally {
      planted.close()
    }
  })
})

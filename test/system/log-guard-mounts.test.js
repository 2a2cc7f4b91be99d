'use strict'

// The test of test/log-guard.test.js that needs root, to mount a tmpfs and an overlay;
// both are unmounted after it, failed or not.
const fs = require('node:fs')
const path = require('node:path')
const { spawnSync } = require('node:child_process')
const { useTmp, unmount, scaled } = require('../helpers')
const { heldAndFreed } = require('../fixtures/lock-holder')

describe('the log guard', function () {
  this.timeout(scaled(20000))
  // What a test mounted, unmounted after it, failed or not, the last mounted first;
  // before useTmp's afterEach removes its directory.
  let mounted = []
  afterEach(() => {
    for (const dir of mounted.reverse()) unmount(dir)
    mounted = []
  })
  const t = useTmp()

  describe('knowing that another process holds a database', () => {
    // Measured on Linux 6.18: with an overlay's layers on different filesystems and
    // xino=off, stat() gives the LOCK file another device than /proc/locks does.
    it('sees it on an overlay whose layers are on different filesystems', async function () {
      const mount = (...args) => spawnSync('mount', args, { encoding: 'utf8' })
      const [lower, upper, work, merged] = ['lower', 'upper', 'work', 'merged'].map((name) => path.join(t.dir, name))
      for (const d of [lower, upper, work, merged]) fs.mkdirSync(d)
      if (mount('-t', 'tmpfs', 'tmpfs', lower).status !== 0) {
        console.log('      skipped: mounting needs root')
        this.skip()
      }
      mounted.push(lower)
      const overlay = mount('-t', 'overlay', 'overlay', '-o', `lowerdir=${lower},upperdir=${upper},workdir=${work},xino=off`, merged)
      if (overlay.status !== 0) {
        console.log(`      skipped: an overlay could not be mounted (${overlay.stderr.trim()})`)
        this.skip()
      }
      mounted.push(merged)
      await heldAndFreed(path.join(merged, 'db'))
    })
  })
})

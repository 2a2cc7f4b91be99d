'use strict'

const { expect } = require('chai')
const { Operations } = require('../lib/api/operations')
const { rejects } = require('./helpers')

describe('operations: the calls close() waits for', () => {
  it('drained() resolves once every operation ended, each end counted once', async () => {
    const ops = new Operations()
    await ops.drained() // none in flight
    const first = ops.enter()
    const second = ops.enter()
    let drained = false
    const waiting = ops.drained().then(() => { drained = true })
    first()
    first() // ending twice does not end the other
    await new Promise(setImmediate)
    expect(drained).to.equal(false)
    second()
    await waiting
    expect(drained).to.equal(true)
  })

  it('once closed, refuses new operations with ECLOSED, but counts admitted ones', async () => {
    const ops = new Operations()
    ops.close()
    expect(() => ops.enter()).to.throw().with.property('code', 'ECLOSED')
    await rejects(ops.run(async () => 'ran'), 'ECLOSED')
    const leave = ops.enter({ admitted: true })
    let drained = false
    const waiting = ops.drained().then(() => { drained = true })
    await new Promise(setImmediate)
    expect(drained).to.equal(false)
    leave()
    await waiting
  })

  it('run() ends its operation however fn ends', async () => {
    const ops = new Operations()
    expect(await ops.run(async () => 'ran')).to.equal('ran')
    await rejects(ops.run(async () => { throw Object.assign(new Error('x'), { code: 'EIO' }) }), 'EIO')
    await ops.drained()
  })
})

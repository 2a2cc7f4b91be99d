'use strict'

const { expect } = require('chai')
const { Progress, MIN_BYTES } = require('../lib/cli/progress')
const { humanSize, duration, describeError } = require('../lib/cli/text')

// Records what is written, with the escape character shown as <ESC>.
function fakeTerminal (isTTY = true) {
  return { isTTY, columns: 100, written: '', write (s) { this.written += s.replaceAll('\x1b', '<ESC>') } }
}

describe('cli progress and formatting', () => {
  it('draws nothing unless stderr is a terminal and the file is large enough', () => {
    expect(Progress.create({ stream: fakeTerminal(false), total: 1e9, label: 'put' })).to.equal(undefined)
    expect(Progress.create({ stream: fakeTerminal(), total: MIN_BYTES - 1, label: 'put' })).to.equal(undefined)
    expect(Progress.create({ stream: fakeTerminal(), total: MIN_BYTES, label: 'put' })).to.be.an.instanceOf(Progress)
  })

  it('shows bytes, rate and ETA on one line, then clears it', () => {
    const term = fakeTerminal()
    const progress = Progress.create({ stream: term, total: 100 * 1024 * 1024, label: 'get' })
    progress.started = Date.now() - 2000
    progress.advance(50 * 1024 * 1024)
    expect(term.written).to.match(/^\rget \[#+-+\] 50\.0 MiB \/ 100\.0 MiB 2\d\.\d MiB\/s ETA 00:0[1-3]<ESC>\[K$/)
    progress.advance(1024) // within the redraw interval: nothing drawn
    expect(term.written.split('\r')).to.have.length(2)
    progress.finish()
    expect(term.written.endsWith('\r<ESC>[K')).to.equal(true)
  })

  it('with an unknown total, shows bytes and rate once a few MiB went by', () => {
    const term = fakeTerminal()
    const progress = Progress.create({ stream: term, total: undefined, label: 'put' })
    progress.advance(1024)
    expect(term.written).to.equal('')
    progress.advance(MIN_BYTES)
    expect(term.written).to.match(/^\rput 4\.0 MiB [\d.]+ [KMG]?i?B\/s<ESC>\[K$/)
  })

  it('formats sizes, durations and system errors for people', () => {
    expect(humanSize(0)).to.equal('0 B')
    expect(humanSize(1536)).to.equal('1.5 KiB')
    expect(humanSize(32 * 1024 ** 3)).to.equal('32.0 GiB')
    expect(duration(3725)).to.equal('1:02:05')
    expect(duration(Infinity)).to.equal('--:--')
    const err = Object.assign(new Error("EACCES: permission denied, open '/x'"), { code: 'EACCES', syscall: 'open', path: '/x' })
    expect(describeError(err)).to.equal('/x: permission denied')
  })
})

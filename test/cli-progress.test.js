'use strict'

const { expect } = require('chai')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { spawnSync } = require('node:child_process')
const { Progress, MIN_BYTES, clearProgress } = require('../lib/cli/progress')
const { humanSize, duration, describeError } = require('../lib/cli/text')
const { scaled } = require('./helpers')

const BIN = path.join(__dirname, '..', 'bin', 'kfs.js')

// Runs `command` with stderr on a pseudo-terminal and `input` on stdin, kept open;
// once `until` shows on the terminal, sends `signal`. Returns what the terminal got
// (latin1) and the signal that ended the command.
const PTY = `
import json, os, pty, select, signal, subprocess, sys, time
spec = json.loads(sys.argv[1])
master, slave = pty.openpty()
child = subprocess.Popen(spec['command'], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=slave)
os.close(slave)
child.stdin.write(b'\\0' * spec['input'])
child.stdin.flush()
seen = b''
def read(timeout):
    global seen
    if not select.select([master], [], [], timeout)[0]:
        return False
    try:
        data = os.read(master, 65536)
    except OSError:  # EIO: the command is gone
        return False
    seen += data
    return bool(data)
deadline = time.time() + spec['waitSeconds']
while spec['until'].encode() not in seen and time.time() < deadline:
    read(0.5)
child.send_signal(getattr(signal, spec['signal']))
child.wait()
while read(0.5):
    pass
print(json.dumps({'signal': -child.returncode, 'terminal': seen.decode('latin1')}))
`

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
    // A quarter in 2 s: 12.5 MiB/s, the 75 MiB left in 6 s (the bytes done would take 2).
    progress.started = Date.now() - 2000
    progress.advance(25 * 1024 * 1024)
    expect(term.written).to.match(/^\rget \[#{10}-{30}\] 25\.0 MiB \/ 100\.0 MiB 1[23]\.\d MiB\/s ETA 00:06<ESC>\[K$/)
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

  it('clearProgress() clears every bar on screen, once, and no other', () => {
    const [a, b, small] = [fakeTerminal(), fakeTerminal(), fakeTerminal()]
    const bars = [Progress.create({ stream: a, total: undefined, label: 'a' }), Progress.create({ stream: b, total: 1e9, label: 'b' })]
    for (const bar of bars) bar.advance(MIN_BYTES)
    Progress.create({ stream: small, total: undefined, label: 'small' }).advance(1024) // never drawn
    bars[1].finish()
    const drawn = b.written
    clearProgress()
    expect(a.written).to.match(/\r<ESC>\[K$/)
    expect(b.written).to.equal(drawn)
    expect(small.written).to.equal('')
    const cleared = a.written
    clearProgress()
    bars[0].finish()
    expect(a.written).to.equal(cleared)
  })

  it('Ctrl-C clears the progress bar on the terminal before kfs ends', function () {
    this.timeout(scaled(60000))
    if (spawnSync('python3', ['-c', 'import pty']).status !== 0) {
      console.log('      skipped: python3 with its pty module is not available')
      return this.skip()
    }
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kfs-'))
    try {
      const spec = { command: [process.execPath, BIN, '-d', path.join(dir, 'db'), 'put'], input: 6 * 1024 * 1024, until: 'put ', signal: 'SIGINT', waitSeconds: scaled(20000) / 1000 }
      const r = spawnSync('python3', ['-c', PTY, JSON.stringify(spec)], { encoding: 'utf8' })
      expect(r.status, r.stderr).to.equal(0)
      const { signal, terminal } = JSON.parse(r.stdout)
      expect(signal).to.equal(2) // killed by SIGINT
      expect(terminal.replaceAll('\x1b', '<ESC>')).to.match(/^\rput [^\r]+ [\d.]+ [KMG]?i?B\/s<ESC>\[K(\rput [^\r]+<ESC>\[K)*\r<ESC>\[K$/)
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
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

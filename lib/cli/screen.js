'use strict'

// The terminal as kfs top takes it over: the alternate screen, the cursor hidden, keys
// read one at a time. leave() gives it back as it was, also from bin/kfs.js as a signal
// ends the process, so that the shell does not come back on a hidden cursor.
let taken // { stdout, stdin }

function enter (stdout, stdin) {
  stdout.write('\x1b[?1049h\x1b[?25l')
  if (stdin && stdin.isTTY) {
    stdin.setRawMode(true)
    stdin.resume()
  }
  taken = { stdout, stdin }
}

function leave () {
  if (!taken) return
  const { stdout, stdin } = taken
  taken = undefined
  if (stdin && stdin.isTTY) stdin.setRawMode(false)
  // Paused whatever it is: a pipe read for keys (`cmd | kfs top`) left flowing would keep
  // the process alive until its writer ends.
  if (stdin) stdin.pause()
  stdout.write('\x1b[?25h\x1b[?1049l')
}

// `lines` drawn from the top left, each line and the rest of the screen cleared after it.
function draw (stdout, lines) {
  stdout.write('\x1b[H' + lines.map((line) => line + '\x1b[K').join('\r\n') + '\x1b[J')
}

module.exports = { enter, leave, draw }

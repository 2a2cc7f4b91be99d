'use strict'

const { MessageChannel } = require('node:worker_threads')

// A holder moves every byte of a file it serves or receives through a Buffer of its
// own (a chunk the binding copied out of LevelDB, a piece of a request's body the HTTP
// parser copied out of the socket), which it drops once the socket wrote it or the
// writer copied it. A dropped Buffer's memory comes back only when V8 next collects,
// which it does after about 64 MiB more of such memory: hundreds of streams through a
// holder then held tens of MiB that nobody used (doc/about.md, "Memory"). So such
// memory is given back at once: a Buffer posted with its memory transferred on a
// closed port is detached, and the message, which nobody will receive, is dropped with
// the memory (the HTML spec detaches a transfer even to a closed port, and Node does).
const { port1: closed } = new MessageChannel()
closed.close()

// Frees the memory of `buffer` now, leaving it empty. Only for a Buffer whose memory
// nothing else uses: the caller owns all of its ArrayBuffer. A Buffer of Node's shared
// pool (small ones) is left to the collector, as is one whose ArrayBuffer cannot be
// detached.
function free (buffer) {
  const memory = buffer.buffer
  if (memory.byteLength <= Buffer.poolSize) return
  try {
    closed.postMessage(null, [memory])
  } catch {
    // not transferable (a SharedArrayBuffer, or detached already): the collector's
  }
}

module.exports = { free }

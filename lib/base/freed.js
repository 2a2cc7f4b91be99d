'use strict'

const { MessageChannel } = require('node:worker_threads')

const { port1: closed } = new MessageChannel()
closed.close()

// Frees a Buffer's memory now, not at V8's next collection (after ~64 MiB more: hundreds
// of streams through a holder held tens of MiB, doc/about.md "Memory"): a transfer to a
// closed port detaches it. The caller owns its ArrayBuffer whole; Node's pool is left alone.
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

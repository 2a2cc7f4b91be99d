'use strict'

// The closed port free() transfers to, made on first use: node:worker_threads and a
// MessageChannel cost a short process (a `kfs` command through a holder) that frees none.
let closed

// Frees a Buffer's memory now, not at V8's next collection (after ~64 MiB more: hundreds
// of streams through a holder held tens of MiB, doc/about.md "Memory"): a transfer to a
// closed port detaches it. The caller owns its ArrayBuffer whole; Node's pool is left alone.
function free (buffer) {
  const memory = buffer.buffer
  if (memory.byteLength <= Buffer.poolSize) return
  try {
    closedPort().postMessage(null, [memory])
  } catch {
    // not transferable (a SharedArrayBuffer, or detached already): the collector's
  }
}

function closedPort () {
  if (!closed) {
    const { MessageChannel } = require('node:worker_threads')
    closed = new MessageChannel().port1
    closed.close()
  }
  return closed
}

module.exports = { free }

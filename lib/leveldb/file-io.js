'use strict'

const fs = require('node:fs')
const { promisify } = require('node:util')
const { unreadable } = require('./coding')

// Descriptors, not FileHandles: for a listing's few small files per shard, a FileHandle
// costs more than the read.
const [readdir, open, close, stat] = [fs.readdir, fs.open, fs.close, fs.stat].map((fn) => promisify(fn))
const read = (fd, buffer, offset, length, position) => new Promise((resolve, reject) => {
  fs.read(fd, buffer, offset, length, position, (err, bytesRead) => (err ? reject(err) : resolve(bytesRead)))
})

async function readAt (fd, position, length, file) {
  const buffer = Buffer.allocUnsafe(length)
  const bytesRead = await read(fd, buffer, 0, length, position)
  if (bytesRead !== length) throw unreadable(`${file}: shorter than the manifest says`)
  return buffer
}

// A read shorter than asked is the file's end (a file that grew meanwhile then ends
// inside a record, which the reader rejects).
async function readWhole (file) {
  const fd = await open(file, 'r')
  try {
    const parts = []
    // From Node's pool first (under 4 KiB): CURRENT and most manifests fit.
    for (let size = 4095; ; size = Math.min(2 * size + 1, 8 * 1024 * 1024)) {
      const buffer = Buffer.allocUnsafe(size)
      const bytesRead = await read(fd, buffer, 0, size, null)
      parts.push(buffer.subarray(0, bytesRead))
      if (bytesRead < size) return parts.length === 1 ? parts[0] : Buffer.concat(parts)
    }
  } finally {
    await close(fd)
  }
}

// The files one read opened, each once, all closed at its end.
class Opened {
  #fds = new Map() // file -> promise of its descriptor

  open (file) {
    if (!this.#fds.has(file)) {
      const fd = open(file, 'r')
      fd.catch(() => {})
      this.#fds.set(file, fd)
    }
    return this.#fds.get(file)
  }

  async close () {
    await Promise.all([...this.#fds.values()].map((fd) => fd.then((n) => close(n), () => {})))
  }
}

module.exports = { readdir, stat, readAt, readWhole, Opened }

'use strict'

// What a measured process uses, as the perf scripts sample it: a directory's bytes on
// disk, and this process's resident memory and open descriptors (Linux: /proc).

const fs = require('node:fs')
const path = require('node:path')

// Bytes under `dir`: the files' sizes, or (allocated) the blocks the files and
// directories, `dir` too, take on the disk, as `du` counts them. LevelDB removes files
// while this walks, so one that vanished counts as gone (du exits non-zero then).
function diskBytes (dir, { allocated = false } = {}) {
  let sum = allocated ? fs.statSync(dir).blocks * 512 : 0
  for (const entry of fs.readdirSync(dir, { withFileTypes: true, recursive: true })) {
    try {
      const stat = (entry.isFile() || (allocated && entry.isDirectory())) && fs.statSync(path.join(entry.parentPath || entry.path, entry.name))
      if (stat) sum += allocated ? stat.blocks * 512 : stat.size
    } catch (err) {
      if (err.code !== 'ENOENT') throw err
    }
  }
  return sum
}

// Private (anonymous) and file-backed resident memory. LevelDB maps the table files it
// reads, so file-backed RSS grows by what was read: page cache the kernel may drop.
function memory () {
  const status = fs.readFileSync('/proc/self/status', 'utf8')
  const field = (name) => Number((status.match(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm')) || [])[1] || 0) * 1024
  return { anon: field('RssAnon'), file: field('RssFile') }
}

// How many descriptors this process holds open; undefined where /proc cannot tell.
function descriptors () {
  try {
    return fs.readdirSync('/proc/self/fd').length
  } catch {
    return undefined
  }
}

module.exports = { diskBytes, memory, descriptors }

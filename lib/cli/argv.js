'use strict'

const fs = require('node:fs')
const { isUtf8 } = require('node:buffer')

// The last `count` arguments of this process as the kernel passed them (Linux's
// /proc/self/cmdline), or undefined where they cannot be read. Node decodes each
// argument as UTF-8 and turns bytes that are not UTF-8 into U+FFFD, so process.argv
// alone cannot tell `kfs put --key $'\xffx'` from a name that holds U+FFFD.
function rawArguments (count) {
  let cmdline
  try {
    cmdline = fs.readFileSync('/proc/self/cmdline')
  } catch {
    return undefined
  }
  const parts = []
  for (let start = 0; start < cmdline.length;) {
    const end = cmdline.indexOf(0, start)
    parts.push(cmdline.subarray(start, end === -1 ? cmdline.length : end))
    start = end === -1 ? cmdline.length : end + 1
  }
  return count === 0 ? [] : parts.slice(-count)
}

// An EINVAL error for the first argument that is not UTF-8, or undefined. Read as
// Node reads it, such an argument would name another file or key than the one meant.
function notUtf8 (raw, args) {
  const i = raw.findIndex((bytes) => !isUtf8(bytes))
  if (i === -1) return undefined
  return Object.assign(new Error(`argument ${i + 1} (${JSON.stringify(args[i])}) is not valid UTF-8: kfs would read it as another name or path, with U+FFFD for the bytes it cannot decode; give names and paths in UTF-8`), { code: 'EINVAL' })
}

module.exports = { rawArguments, notUtf8 }

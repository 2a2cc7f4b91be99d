'use strict'

const fs = require('node:fs')
const path = require('node:path')
const crypto = require('node:crypto')

// `kfs get KEY FILE`: writes what `fill(stream)` pipes into `stream` to FILE, as `cp`
// would put it there:
// - a regular file, or a path where nothing is, is written beside it, synced and renamed
//   into place: an error or a crash never leaves a truncated file, and an existing file
//   is replaced only by a complete one, with its owner, group and mode bits (setuid and
//   setgid included; the owner only where this process may give it, as root);
// - anything else that exists (/dev/null, a FIFO, a terminal, a disk) is written
//   through, opened for writing as it is: renaming over it would replace a device or a
//   FIFO with a regular file (and fail without write permission on its directory);
// - a symbolic link is followed, and the rules above apply to what it points to; a
//   link to nothing is refused (ENOENT), as GNU cp refuses, rather than creating a
//   file wherever it points;
// - a directory is refused (EISDIR) before anything is read.
// An interruption (Ctrl-C) removes the temporary file: it is in `temps` meanwhile.
async function writeFile (file, temps, fill) {
  const { target, stats } = await resolve(file)
  if (!stats) return replace(file, target, undefined, temps, fill)
  if (stats.isDirectory()) throw Object.assign(new Error(`${file} is a directory: name the file to write`), { code: 'EISDIR', path: file })
  if (stats.isFile()) return replace(file, target, stats, temps, fill)
  return writeThrough(target, stats, fill)
}

// What `file` names, with its stats (none when nothing is there): through a symbolic
// link, its stats, and the final path of a regular file, to rename over. Anything else
// is opened through the link: /dev/stdout's target (/proc/self/fd/1) may be a pipe,
// which has no path.
async function resolve (file) {
  const link = await fs.promises.lstat(file).catch(absent)
  if (!link) return { target: file }
  if (!link.isSymbolicLink()) return { target: file, stats: link }
  const stats = await fs.promises.stat(file).catch(absent)
  if (!stats) {
    const to = await fs.promises.readlink(file)
    throw Object.assign(new Error(`${file} is a symbolic link to ${to}, which does not exist: not writing through it`), { code: 'ENOENT', path: file })
  }
  return { target: stats.isFile() ? await fs.promises.realpath(file) : file, stats }
}

function absent (err) {
  if (err.code !== 'ENOENT') throw err
}

// Opened write-only, neither created nor truncated: a device or a FIFO takes the bytes
// as they come (a FIFO's open waits for a reader). Only a disk is synced: fsync means
// nothing to the others, and fails on some.
async function writeThrough (target, stats, fill) {
  const handle = await fs.promises.open(target, fs.constants.O_WRONLY)
  try {
    await fill(handle.createWriteStream({ autoClose: false }))
    if (stats.isBlockDevice()) await handle.sync()
  } finally {
    await handle.close()
  }
}

// The temporary file replacing an existing one is made 0600, and given the file's mode
// once complete: others never read, while it is written, what they may not read in the
// file. A new file is made with the mode it keeps (0666 less the umask), as cp makes it.
async function replace (file, target, stats, temps, fill) {
  const dir = path.dirname(path.resolve(target))
  const tmp = path.join(dir, `.${path.basename(target)}.kfs-${crypto.randomBytes(4).toString('hex')}`)
  if (temps) temps.add(tmp)
  try {
    await fill(fs.createWriteStream(tmp, { flags: 'wx', mode: stats ? 0o600 : 0o666 }))
    const handle = await fs.promises.open(tmp, 'r+')
    try {
      if (stats) await keepOwnerAndMode(handle, stats)
      await handle.sync()
    } finally {
      await handle.close()
    }
    await fs.promises.rename(tmp, target)
    await syncDir(dir)
  } catch (err) {
    await fs.promises.rm(tmp, { force: true })
    // The temporary file is ours: the user named the target.
    if (err.path === tmp) {
      err.path = file
      err.message = err.message.split(tmp).join(file)
    }
    throw err
  } finally {
    if (temps) temps.delete(tmp)
  }
}

// The owner and group are given where this process may (root; a user only a group of
// its own), then the mode bits, which chown clears setuid and setgid from.
async function keepOwnerAndMode (handle, stats) {
  await handle.chown(stats.uid, stats.gid).catch((err) => {
    if (err.code !== 'EPERM') throw err
  })
  await handle.chmod(stats.mode & 0o7777)
}

// The rename is durable once the directory is synced.
async function syncDir (dir) {
  const handle = await fs.promises.open(dir, 'r')
  try {
    await handle.sync()
  } finally {
    await handle.close()
  }
}

module.exports = { writeFile }

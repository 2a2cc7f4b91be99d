'use strict'

const fs = require('node:fs')
const path = require('node:path')
const crypto = require('node:crypto')

// `kfs get KEY FILE`: opens FILE to take what `fill(stream)` pipes into `stream`, as `cp`
// would put it there. Resolves to { write(fill), close() }:
// - a regular file, or a path where nothing is, is written beside it, synced and renamed
//   into place: never a truncated file, and an existing one keeps its owner (where this
//   process may give it), group and mode bits (setuid and setgid included);
// - anything else that exists (/dev/null, a FIFO, a terminal, a disk) is opened for
//   writing here, before write(): renaming over it would replace it with a regular file.
//   The caller opens the store only then, as a shell opens `> FIFO` first: a FIFO's open
//   waits for a reader, and a store opened meanwhile would be held;
// - a symbolic link is followed; a link to nothing is refused (ENOENT), as GNU cp does;
// - a directory is refused (EISDIR), and a socket (ENXIO), before anything is read.
// Ctrl-C removes the temporary file: it is in `temps` meanwhile.
async function openTarget (file, temps) {
  for (let attempt = 1; ; attempt++) {
    const { target, stats } = await resolve(file)
    if (!stats || stats.isFile()) return { write: (fill) => replace(file, target, stats, temps, fill), close: async () => {} }
    if (stats.isDirectory()) throw Object.assign(new Error(`${file} is a directory: name the file to write`), { code: 'EISDIR', path: file })
    if (stats.isSocket()) throw Object.assign(new Error(`${file} is a socket: kfs writes to files, devices and FIFOs`), { code: 'ENXIO', path: file })
    const handle = await fs.promises.open(target, fs.constants.O_WRONLY | fs.constants.O_NOCTTY)
    // What was opened is what lstat saw, not a regular file put there since (its inode
    // number may be the removed FIFO's: the type is compared too).
    const opened = await handle.stat().catch((err) => handle.close().then(() => { throw err }))
    if (opened.dev === stats.dev && opened.ino === stats.ino && (opened.mode & fs.constants.S_IFMT) === (stats.mode & fs.constants.S_IFMT)) return { write: (fill) => writeThrough(handle, stats, fill), close: () => handle.close() }
    await handle.close()
    if (attempt === 3) throw Object.assign(new Error(`${file} keeps changing while it is opened: not writing to it`), { code: 'EAGAIN', path: file })
  }
}

// What `file` names, with its stats (none when nothing is there), through a symbolic
// link; a regular file's final path, to rename over. Anything else is opened through the
// link: /dev/stdout's target may be a pipe, which has no path.
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

// Neither created nor truncated. Only a disk is synced: fsync fails on some others. The
// stream is destroyed before the handle's close(), which waits for its references.
async function writeThrough (handle, stats, fill) {
  const stream = handle.createWriteStream({ autoClose: false })
  try {
    await fill(stream)
    if (stats.isBlockDevice()) await handle.sync()
  } finally {
    if (!stream.closed) await new Promise((resolve) => stream.once('close', resolve).destroy())
  }
}

// The temporary file replacing an existing one is 0600 until complete, then gets the
// file's mode: nobody reads it meanwhile who may not read the file. A new file is made
// with the mode it keeps (0666 less the umask), as cp makes it.
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
    throw ownError(err, file, target, tmp, stats)
  } finally {
    if (temps) temps.delete(tmp)
  }
}

// Owner and group where this process may, then the mode bits (chown clears setuid).
async function keepOwnerAndMode (handle, stats) {
  await handle.chown(stats.uid, stats.gid).catch((err) => {
    if (err.code !== 'EPERM') throw err
  })
  await handle.chmod(stats.mode & 0o7777)
}

// An error of the temporary file names the target. Without permission to create it,
// it says so: the file may be writable (cp writes in place), its directory is not.
function ownError (err, file, target, tmp, stats) {
  if (err.path !== tmp) return err
  if (stats && err.syscall === 'open' && (err.code === 'EACCES' || err.code === 'EPERM')) {
    return Object.assign(new Error(`cannot create a temporary file in ${path.dirname(target)} to replace ${file} atomically (permission denied)`), { code: err.code, path: file, cause: err })
  }
  err.path = file
  err.message = err.message.split(tmp).join(file)
  return err
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

module.exports = { openTarget }

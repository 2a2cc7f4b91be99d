'use strict'

const fs = require('node:fs/promises')
const path = require('node:path')
const errors = require('../api/errors')

// An open of a store another user owns (or with their files in it) fails at whatever
// meets the permissions first: LevelDB's LOCK, the log guard's hard link (EPERM on
// another's file), tmp/ emptied. Such a failure becomes EACCES saying whose the store or
// file is. `dirs`: the store's, then the database's; `files`: what it writes first.
// Root passes permission bits: its failures are not about owners, nor are a read-only
// open's of a store this process may read.
async function ownersRefusal (err, dirs, files, { readOnly = false, props } = {}) {
  if (!['EACCES', 'EPERM'].includes(err.code) || typeof process.geteuid !== 'function' || process.geteuid() === 0) return err
  const foreign = await foreignOwner([...dirs, ...files, ...namedPaths(err)])
  if (!foreign) return err
  const readable = await allAccess(dirs, fs.constants.R_OK | fs.constants.X_OK)
  if (readOnly && readable) return err
  return errors.otherUser(dirs[0], foreign.path, foreign.uid, readable, err, props)
}

// The first of `paths` another user owns, as { path, uid }.
async function foreignOwner (paths) {
  if (typeof process.geteuid !== 'function') return undefined
  for (const p of paths) {
    const stat = await fs.stat(p).catch(() => undefined)
    if (stat && stat.uid !== process.geteuid()) return { path: p, uid: stat.uid }
  }
  return undefined
}

function namedPaths (err) {
  const paths = []
  for (let e = err; e; e = e.cause) paths.push(e.path, e.dest)
  return paths.filter((p) => typeof p === 'string')
}

async function allAccess (paths, mode) {
  for (const p of paths) if (!(await fs.access(p, mode).then(() => true, () => false))) return false
  return true
}

// Why the directory `made` could not be created (`err`, from mkdir), in kfs's words.
function mkdirWhy (made, err) {
  const parent = path.dirname(made)
  const user = typeof process.geteuid === 'function' ? ` (user ${process.geteuid()})` : ''
  if (err.code === 'EACCES' || err.code === 'EPERM') return `permission denied: this process${user} may not write in ${parent}`
  if (err.code === 'EROFS') return `${parent} is on a read-only file system`
  if (err.code === 'ENOTDIR') return 'a part of that path is a file, not a directory'
  if (err.code === 'ENOSPC') return 'the disk is full'
  return String(err.message).replace(/^E[A-Z]+: /, '').split(', ')[0]
}

module.exports = { ownersRefusal, mkdirWhy }

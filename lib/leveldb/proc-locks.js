'use strict'

// Reads Linux's /proc/locks from its text alone, so that what it says can be tested
// without a lock held: "<n>: POSIX ADVISORY WRITE <pid> <major>:<minor>:<inode> ...",
// the device numbers in hex.

const OVERLAYFS_MAGIC = 0x794c7630 // statfs()'s type for an overlay

// Whether `table` lists a lock on the file whose stat (bigint) gave `dev` and `ino`.
// On an overlay, the device /proc/locks names need not be the one stat() reports
// (layers on different filesystems without xino, measured on Linux 6.18; older kernels
// name the upper layer's), so there the inode alone decides: taking a lock for held is
// harmless, missing one is not.
function lockListed (table, stat, overlay) {
  if (!table.includes(`:${stat.ino}`)) return false // most often, and cheaper than a pattern
  return new RegExp(`\\s${fileOf(stat, overlay)}\\s`).test(table)
}

// The process IDs holding a write lock on that file (the lines of waiters, "->", aside).
function lockOwners (table, stat, overlay) {
  const line = new RegExp(`^\\d+: (?:OFD|POSIX)\\s+ADVISORY\\s+WRITE\\s+(-?\\d+)\\s+${fileOf(stat, overlay)}\\s`, 'gm')
  return [...table.matchAll(line)].map((m) => Number(m[1])).filter((pid) => pid > 0)
}

// The pattern of the file in a line of /proc/locks: major:minor:inode.
function fileOf ({ dev, ino }, overlay) {
  // glibc's major() and minor(), which /proc/locks prints apart.
  const major = ((dev >> 8n) & 0xfffn) | ((dev >> 32n) & ~0xfffn)
  const minor = (dev & 0xffn) | ((dev >> 12n) & ~0xffn)
  const device = overlay ? '[0-9a-f]+:[0-9a-f]+' : `${major.toString(16).padStart(2, '0')}:${minor.toString(16).padStart(2, '0')}`
  return `${device}:${ino}`
}

module.exports = { lockListed, lockOwners, OVERLAYFS_MAGIC }

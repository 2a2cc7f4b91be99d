'use strict'

// Linux's /proc/locks read from its text alone (testable without a lock held):
// "<n>: POSIX ADVISORY WRITE <pid> <major>:<minor>:<inode> ...", device numbers in hex.

const OVERLAYFS_MAGIC = 0x794c7630 // statfs()'s type for an overlay

// Whether `table` lists a lock on the file of that stat (bigint). On an overlay the
// device it names may differ from stat()'s (layers on different filesystems without xino,
// Linux 6.18), so the inode alone decides: a lock wrongly seen as held is harmless.
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
  const major = ((dev >> 8n) & 0xfffn) | ((dev >> 32n) & ~0xfffn) // glibc's major(), minor()
  const minor = (dev & 0xffn) | ((dev >> 12n) & ~0xffn)
  const device = overlay ? '[0-9a-f]+:[0-9a-f]+' : `${major.toString(16).padStart(2, '0')}:${minor.toString(16).padStart(2, '0')}`
  return `${device}:${ino}`
}

module.exports = { lockListed, lockOwners, OVERLAYFS_MAGIC }

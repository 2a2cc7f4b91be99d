'use strict'

const fs = require('node:fs/promises')
const path = require('node:path')
const { RESERVE_FILE } = require('./disk-reserve')

// Bytes of every file under dir (sizes, not blocks), less the disk reserve.
async function diskUsage (dir, top = true) {
  let total = 0
  // A directory gone meanwhile (a spare removed, a shard renamed out of tmp/) holds nothing.
  const entries = await fs.readdir(dir, { withFileTypes: true }).catch((err) => {
    if (top || err.code !== 'ENOENT') throw err
    return []
  })
  for (const entry of entries) {
    const full = path.join(dir, entry.name)
    if (top && entry.name === RESERVE_FILE) continue
    if (entry.isDirectory()) total += await diskUsage(full, false)
    else if (entry.isFile()) total += (await fs.stat(full).catch(() => ({ size: 0 }))).size // gone meanwhile: LevelDB deletes files
  }
  return total
}

// 0 while given up, and in a store opened read-only that never had one.
async function reserveBytes (dir) {
  const stats = await fs.stat(path.join(dir, RESERVE_FILE)).catch((err) => {
    if (err.code !== 'ENOENT') throw err
  })
  return stats ? stats.size : 0
}

module.exports = { diskUsage, reserveBytes }

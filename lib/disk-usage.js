'use strict'

const fs = require('node:fs/promises')
const path = require('node:path')

// Bytes of every file under dir (the sizes the files report, not blocks).
async function diskUsage (dir) {
  let total = 0
  for (const entry of await fs.readdir(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name)
    if (entry.isDirectory()) total += await diskUsage(full)
    else if (entry.isFile()) total += (await fs.stat(full).catch(() => ({ size: 0 }))).size // gone meanwhile: LevelDB deletes files
  }
  return total
}

module.exports = { diskUsage }

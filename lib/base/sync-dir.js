'use strict'

const fs = require('node:fs/promises')

// A new, renamed or removed entry is durable only once its directory is synced.
async function syncDir (dir) {
  const handle = await fs.open(dir, 'r')
  try {
    await handle.sync()
  } finally {
    await handle.close()
  }
}

module.exports = { syncDir }

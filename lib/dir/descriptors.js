'use strict'

const fs = require('node:fs')

// Descriptors an open shard holds: LOCK, LOG, the log and MANIFEST (4, measured), plus 2
// LevelDB opens for a while (the next log, a table it writes). Tables it reads are mapped
// (up to 1,000 per process) and hold none (doc/about.md, Resources).
const PER_SHARD = 6
// Left to the rest of the process: Node, the app, its sockets and files.
const KEPT_FREE = 64

// The soft limit on open files (Node raises it to the hard one), or undefined.
function descriptorLimit () {
  try {
    const line = fs.readFileSync('/proc/self/limits', 'utf8').split('\n').find((l) => l.startsWith('Max open files'))
    const soft = line && line.split(/\s{2,}/)[1]
    return soft === 'unlimited' ? Infinity : Number(soft) || undefined
  } catch {
    return undefined
  }
}

// Connections a holder serves at once (lib/share/server.js) where nothing bounds them lower.
const MAX_CONNECTIONS = 1024

// What the shards leave free of `limit`: a quarter of it, at least KEPT_FREE.
const spareOf = (limit) => Math.max(KEPT_FREE, Math.floor(limit / 4))

// Shards open at once without a user's cap: as many as leave spareOf(limit) free.
function defaultOpenShards (shardCount, limit = descriptorLimit()) {
  if (limit === undefined || limit === Infinity) return shardCount
  return Math.max(1, Math.min(shardCount, Math.floor((limit - spareOf(limit)) / PER_SHARD)))
}

// A quarter of the spare (at most MAX_CONNECTIONS); as many again may wait for their
// refusal, and half stays for the rest of the process.
function defaultConnections (limit = descriptorLimit()) {
  if (limit === undefined || limit === Infinity) return MAX_CONNECTIONS
  return Math.min(MAX_CONNECTIONS, Math.floor(spareOf(limit) / 4))
}

module.exports = { descriptorLimit, defaultOpenShards, defaultConnections, PER_SHARD }

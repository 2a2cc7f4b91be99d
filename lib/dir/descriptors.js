'use strict'

const fs = require('node:fs')

// File descriptors an open shard holds: LevelDB's LOCK, LOG, current log and MANIFEST
// (4, as measured: doc/performance.md), plus 2 for what LevelDB opens for a while: the
// next log when the memtable fills, a table it is writing. Table files it reads are
// memory-mapped (LevelDB 1.20, up to 1,000 per process) and hold none; past that, each
// table read holds one (doc/about.md, Resources).
const PER_SHARD = 6
// Left to the rest of the process: Node, the app, its sockets and files.
const KEPT_FREE = 64

// The process's soft limit on open files, or undefined where the system does not say
// (Node raises the soft limit to the hard one when it starts).
function descriptorLimit () {
  try {
    const line = fs.readFileSync('/proc/self/limits', 'utf8').split('\n').find((l) => l.startsWith('Max open files'))
    const soft = line && line.split(/\s{2,}/)[1]
    return soft === 'unlimited' ? Infinity : Number(soft) || undefined
  } catch {
    return undefined
  }
}

// Connections a holder serves at once (lib/share/server.js) where nothing bounds them
// lower: each holds a descriptor, and more take memory.
const MAX_CONNECTIONS = 1024

// What the shards leave free of `limit`: a quarter of it, at least KEPT_FREE.
const spareOf = (limit) => Math.max(KEPT_FREE, Math.floor(limit / 4))

// How many shards may be open at once when the user set no cap: every shard, as far as
// the descriptor limit allows while its spare (spareOf) stays free.
function defaultOpenShards (shardCount, limit = descriptorLimit()) {
  if (limit === undefined || limit === Infinity) return shardCount
  return Math.max(1, Math.min(shardCount, Math.floor((limit - spareOf(limit)) / PER_SHARD)))
}

// How many connections a holder serves at once: a quarter of the spare (at most
// MAX_CONNECTIONS), as many again may wait for their refusal, and the other half of
// the spare stays for the rest of the process (Node, the app, files being put).
function defaultConnections (limit = descriptorLimit()) {
  if (limit === undefined || limit === Infinity) return MAX_CONNECTIONS
  return Math.min(MAX_CONNECTIONS, Math.floor(spareOf(limit) / 4))
}

module.exports = { descriptorLimit, defaultOpenShards, defaultConnections, PER_SHARD }

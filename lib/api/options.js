'use strict'

const errors = require('./errors')
const { MEMORY, MIN_MEMORY } = require('./memory')

const KiB = 1024
const MiB = 1024 * KiB
const TiB = 1024 ** 4

const DEFAULTS = Object.freeze({
  maxTableSize: 8 * TiB,
  shardCount: 256,
  chunkSize: 128 * KiB,
  sync: false,
  create: true,
  readOnly: false,
  diskReserve: 16 * MiB,
  reclaim: true,
  maxOpenShards: undefined, // every shard, as far as the descriptor limit allows
  // Idle shards stay open: reopening one costs its next call 5 to 30 ms, and what they
  // hold is bounded (doc/about.md, Resources). Set, it closes shards idle that long.
  idleTimeout: undefined,
  // Shards opened in the background as the store opens, for its first calls; the
  // command line, which makes one call, would pay for opens it never uses.
  openAhead: true,
  shardWaitTimeout: 30000,
  memory: MEMORY,
  // Files in the trash longer than this many days are removed for good by themselves.
  trashDays: 7,
  // Other processes use the store through this one while it holds it (lib/share/).
  share: true,
  // false: the store is used only through the process that holds it, never opened here
  // (a watcher such as kfs metrics --listen, which must not keep a node from holding it).
  hold: true
})

const integer = (min, max) => (name, value) => {
  if (typeof value !== 'number') throw errors.invalidType(`options.${name}`, 'a number', value)
  if (!Number.isSafeInteger(value) || value < min || value > max) throw errors.invalidValue(`options.${name}`, `must be an integer from ${min} to ${max}, got ${value}`)
  return value
}

function boolean (name, value) {
  if (typeof value !== 'boolean') throw errors.invalidType(`options.${name}`, 'a boolean', value)
  return value
}

const CHECKS = {
  referenceId (name, value) {
    if (typeof value !== 'string') throw errors.invalidType(`options.${name}`, 'a string of 40 hex characters', value)
    if (!/^[0-9a-fA-F]{40}$/.test(value)) throw errors.invalidValue(`options.${name}`, `must be 40 hex characters, got ${JSON.stringify(value)}`)
    return value.toLowerCase()
  },
  // The table is split into up to 256 equal shards, each holding at least one byte.
  maxTableSize: integer(256, Number.MAX_SAFE_INTEGER),
  // A benchmarking aid: 1 makes the store a single LevelDB, the "vanilla" engine.
  shardCount (name, value) {
    integer(1, 256)(name, value)
    if ((value & (value - 1)) !== 0) throw errors.invalidValue(`options.${name}`, `must be a power of two from 1 to 256, got ${value}`)
    return value
  },
  chunkSize: integer(1, 64 * MiB),
  sync: boolean,
  create: boolean,
  readOnly: boolean,
  diskReserve: integer(0, 1024 * 1024 * MiB),
  reclaim: boolean,
  maxOpenShards: integer(1, 256),
  idleTimeout: integer(0, 2 ** 31 - 1),
  openAhead: boolean,
  shardWaitTimeout: integer(0, 2 ** 31 - 1),
  memory: integer(MIN_MEMORY, Number.MAX_SAFE_INTEGER),
  share: boolean,
  hold: boolean,
  // A fraction of a day is allowed; at most 100 years.
  trashDays (name, value) {
    if (typeof value !== 'number') throw errors.invalidType(`options.${name}`, 'a number', value)
    if (!Number.isFinite(value) || value < 0 || value > 36500) throw errors.invalidValue(`options.${name}`, `must be a number of days from 0 to 36500, got ${value}`)
    return value
  }
}

// EINVAL unless `options` is a plain object naming only `known` options.
function checkOptionNames (options, known) {
  if (options === null || typeof options !== 'object' || Array.isArray(options)) throw errors.invalidType('options', 'an object', options)
  const unknown = Object.keys(options).find((name) => !known.includes(name))
  if (unknown) throw errors.invalidValue('options', `has an unknown option "${unknown}" (known: ${known.join(', ')})`)
  return options
}

// Returns { given, resolved }: `given` holds only what the caller set, so that options
// persisted in the store are checked against explicit choices, not defaults.
function parseOptions (options = {}) {
  const given = {}
  for (const [name, value] of Object.entries(checkOptionNames(options, Object.keys(CHECKS)))) {
    if (value !== undefined) given[name] = CHECKS[name](name, value)
  }
  return { given, resolved: { ...DEFAULTS, ...given } }
}

module.exports = { parseOptions, checkOptionNames, DEFAULTS }

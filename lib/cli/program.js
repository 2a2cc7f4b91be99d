'use strict'

const fs = require('node:fs/promises')
const os = require('node:os')
const path = require('node:path')
const { Command, InvalidArgumentError, CommanderError } = require('commander')
const kfs = require('../..')
const commands = require('./commands')
const { describeError, systemReason } = require('./text')
const { notUtf8 } = require('./argv')
const { timeOf } = require('./when')
const { version } = require('../../package.json')

const defaultDb = (env) => env.KFS_DB || path.join(os.homedir(), '.kfs', 'default')

// Why this process cannot write the store at `dir` ('read-only file system', 'permission
// denied: it belongs to user N'...), else undefined (also for no store: its open says).
// A read-write open needs its directory, state directory and the state's LOCK first.
async function notWritable (dir) {
  for (const p of [dir, path.join(dir, 'state'), path.join(dir, 'state', 'LOCK')]) {
    const failed = await fs.access(p, fs.constants.W_OK).then(() => undefined, (err) => err)
    if (!failed) continue
    if (!kfs.errors.NOT_WRITABLE.includes(failed.code)) return undefined
    const owner = failed.code !== 'EROFS' ? await otherOwner(p) : undefined
    return systemReason(failed) + (owner !== undefined ? `: ${p === dir ? 'it' : p} belongs to user ${owner}` : '')
  }
  return undefined
}

// The ID of the user `file` belongs to, if not this process's.
async function otherOwner (file) {
  const stat = await fs.stat(file).catch(() => undefined)
  return stat && typeof process.geteuid === 'function' && stat.uid !== process.geteuid() ? stat.uid : undefined
}

const WRITES = new Set(['put', 'unlink', 'compact', 'repair', 'trash', 'restore-trash', 'empty-trash'])

function nonNegativeInteger (value) {
  if (!/^\d+$/.test(value)) throw new InvalidArgumentError('must be a non-negative integer.')
  if (!Number.isSafeInteger(Number(value))) throw new InvalidArgumentError(`must be at most ${Number.MAX_SAFE_INTEGER}.`)
  return Number(value)
}

// --end: no file holds 2^53 bytes, so a larger one means "to the end", as past the end does.
function lastByte (value) {
  if (!/^\d+$/.test(value)) throw new InvalidArgumentError('must be a non-negative integer.')
  return Math.min(Number(value), Number.MAX_SAFE_INTEGER)
}

// --listen: "HOST:PORT", "[IPv6]:PORT" or ":PORT" (every interface) as { host, port }.
function listenAddress (value) {
  const m = /^(?:\[([^\]]+)\]|([^:[\]]*)):(\d{1,5})$/.exec(value)
  if (!m || Number(m[3]) > 65535) throw new InvalidArgumentError('must be HOST:PORT, [IPv6]:PORT or :PORT, with a port from 0 to 65535.')
  return { host: m[1] ?? (m[2] || undefined), port: Number(m[3]) }
}

// kfs top --interval: seconds between two samples, 0.1 to 3600.
function seconds (value) {
  const n = /^\d+(?:\.\d+)?$/.test(value) ? Number(value) : NaN
  if (!(n >= 0.1 && n <= 3600)) throw new InvalidArgumentError('must be a number of seconds from 0.1 to 3600.')
  return n
}

// The latest expiry a store takes (doc/api.md, "Expiry"): a later one is a usage error
// here, before the store is opened or created.
const LATEST_EXPIRY = 9999999999999

// put --expires: a date, or a duration from now.
function expiryTime (value) {
  const time = when(value, 1)
  if (time.getTime() > LATEST_EXPIRY) throw new InvalidArgumentError(`must be at most ${new Date(LATEST_EXPIRY).toISOString()}, the latest expiry a store takes.`)
  return time
}

// empty-trash --before: a date, or a duration before now ("trashed more than 7d ago").
const trashedBefore = (value) => when(value, -1)

function when (value, sign) {
  try {
    return timeOf(value, sign)
  } catch (err) {
    throw new InvalidArgumentError(err.message)
  }
}

function shardNumber (value) {
  const n = nonNegativeInteger(value)
  if (n > 255) throw new InvalidArgumentError('must be a shard number from 0 to 255.')
  return n
}

// `run(name, args)` gets a command's name and arguments (commander's options last);
// writeOut and writeErr take help and errors; `json`: usage errors as JSON.
function buildProgram (run, env, { writeOut, writeErr, json = false } = {}) {
  const program = new Command('kfs')
    .description('Store files in a kfs store: sharded, chunked and content-addressed, on LevelDB.')
    .version(version, '-V, --version', 'print the version')
    .helpOption('-h, --help', 'show help')
    .helpCommand(false) // a command of its own, below
    // Each command's help shows -d, --db too: it applies to every command.
    .configureHelp({ showGlobalOptions: true })
    .option('-d, --db <dir>', `the store to use (default: $KFS_DB, else ~/.kfs/default; now ${defaultDb(env)})`)
    .option('--read-only', 'open the store for reads only, writing nothing in it; the default when it cannot be written')
    .option('--json', 'print results as JSON, and errors as one JSON line on stderr: {"error":{"code","message",...}}')
    .exitOverride()
  addFileCommands(program, run)
  addTrashCommands(program, run)
  addStoreCommands(program, run)
  addHelpCommand(program)
  // A command copies the program's output settings when it is created: set on each.
  for (const command of [program, ...program.commands]) {
    command.configureOutput({ writeOut, writeErr, outputError: (message, write) => write(usageError(message, command, json)) })
  }
  return program
}

// The commands on one file: put, get, unlink, exists, stat, trash.
function addFileCommands (program, run) {
  program.command('put').alias('write')
    .argument('[file]', 'the file to store; standard input when absent or "-"')
    .option('--key <key>', 'store it under this key (40 or 64 hex characters) or name instead of its SHA-256')
    .option('--size <bytes>', 'store exactly the first <bytes> bytes of the input; needed for a character device such as /dev/zero', nonNegativeInteger)
    .option('--allow-empty', 'store an empty standard input (refused otherwise: an empty input is more often a mistake)')
    .option('--expires <when>', 'the file is gone from then on: after a duration (30s, 15m, 1h, 7d) or at a date (2026-12-01, midnight UTC; 2026-12-01T10:00:00Z)', expiryTime)
    .description('store a file and print its key (the SHA-256 of its content, unless --key is given)')
    .action((file, options) => run('put', [file, options]))

  program.command('get').alias('read')
    .argument('<key>', 'the key (or name) of the file')
    .argument('[file]', 'where to write it; standard output when absent or "-"')
    .option('--start <n>', 'first byte to read (default 0)', nonNegativeInteger)
    .option('--end <n>', 'last byte to read, inclusive; past the end of the file means to its end (the default)', lastByte)
    .option('-f, --force', 'write a file that looks binary to standard output even when it is a terminal (as FILE "-" does)')
    .description('write a stored file, or a byte range of it, to a file or standard output')
    .action((key, file, options) => run('get', [key, file, options]))

  program.command('unlink')
    .argument('<key>', 'the key (or name) of the file')
    .description('remove a file')
    .action((key) => run('unlink', [key]))

  program.command('exists')
    .argument('<key>', 'the key (or name) of the file')
    .description('print true and exit 0 if the file is stored, else print false and exit 1')
    .action((key) => run('exists', [key]))

  program.command('stat')
    .argument('[key]', 'the key (or name) of a file; without it, the store\'s usage')
    .option('-H, --human', 'sizes in KiB, MiB, GiB...')
    .option('--shards', 'without a key: a row per shard instead of the summary')
    .description('show a file\'s size, chunks, shard, time, name and expiry, or the store\'s usage: used, free (the store\'s room or the filesystem\'s, the smaller), capacity, reclaimable, trash, files, shards, disk, reserve, and the process holding the store')
    .action((key, options) => run('stat', [key, options]))

  program.command('trash')
    .argument('<key>', 'the key (or name) of the file')
    .description('move a file to the trash: it is gone to readers until kfs restore-trash, and removed for good by kfs empty-trash or after the store\'s trashDays (7 by default)')
    .action((key) => run('trash', [key]))
}

// The commands on the trash: restore-trash, empty-trash.
function addTrashCommands (program, run) {
  program.command('restore-trash')
    .description('bring back every file in the trash; prints the files and bytes restored')
    .action(() => run('restore-trash', []))

  program.command('empty-trash')
    .option('--before <when>', 'only the files trashed before a date (2026-12-01, midnight UTC; 2026-12-01T10:00:00Z) or more than a duration ago (30s, 15m, 1h, 7d)', trashedBefore)
    .description('remove for good the files in the trash (all of them without --before); prints the files and bytes removed')
    .action((options) => run('empty-trash', [options]))
}

// The commands on the whole store or a shard: list, verify, repair, metrics, top, compact.
function addStoreCommands (program, run) {
  program.command('list')
    .argument('[shard]', 'only this shard (0 to 255)', shardNumber)
    .description('list stored files, one per line: key<TAB>size<TAB>name (with --json, one JSON object per line)')
    .action((shard, options) => run('list', [shard, options]))

  program.command('verify')
    .option('--shard <n>', 'only this shard (0 to 255)', shardNumber)
    .description('read every stored file and check it; exit 1 if any problem is found')
    .action((options) => run('verify', [options]))

  program.command('repair')
    .argument('<shard>', 'the damaged shard (0 to 255)', shardNumber)
    .description('repair a damaged shard: recover what LevelDB can, drop files that cannot be recovered (listed), rebuild its accounting')
    .action((shard, options) => run('repair', [shard, options]))

  program.command('metrics')
    .option('--listen <address>', 'serve /metrics over HTTP at HOST:PORT ([IPv6]:PORT; :PORT: every interface) for Prometheus, until killed: the figures of whichever process holds the store, 503 while none does; never holds the store itself', listenAddress)
    .description('print the store\'s metrics in Prometheus\'s text format (with --json, as one JSON object): those of the process holding the store, else of the store as this command opened it')
    .action((options) => run('metrics', [options]))

  program.command('top')
    .option('--once', 'print one snapshot and exit, as with --json or when standard output is not a terminal')
    .option('--interval <seconds>', 'seconds between two samples, 0.1 to 3600 (default: 1)', seconds)
    .description('a live view of the store, redrawn every second (--interval): files, bytes, reclaimable, disk, reserve, shards, memory, and operations per second with their p99 and a minute of history; q quits. Never holds the store: shows whichever process does, or the figures as of the store\'s last close')
    .action((options) => run('top', [options]))

  program.command('compact')
    .description('compact every shard, reclaiming the space of removed data; prints disk use before and after, or that there was nothing to reclaim')
    .action(() => run('compact', []))
}

function addHelpCommand (program) {
  program.command('help')
    .argument('[command]', 'the command to describe')
    .description('show help for a command, or the list of commands')
    .action((name) => {
      if (name === undefined) return program.help()
      const command = program.commands.find((c) => c.name() === name || c.aliases().includes(name))
      if (command) return command.help()
      // Parsed, an unknown name is the usual usage error, with commander's suggestion.
      return program.parseAsync([name], { from: 'user' })
    })
}

// A usage error as one line: commander's "(Did you mean put?)" goes on the same line,
// and the line says where the help is.
function usageError (message, command, json) {
  const text = message.trim().replace(/^error: /, '').replace(/\n\(Did you mean (.*)\?\)$/, ' (did you mean $1?)').replace(/\.$/, '')
  const help = command.parent ? `kfs ${command.name()} --help` : 'kfs --help'
  return json ? errorLine({ code: 'EINVAL', message: `${text}; see '${help}'` }) : `kfs: ${text}; see '${help}'\n`
}

// The properties of a kfs error a script may use, beside its code and message.
const ERROR_PROPS = ['key', 'fileName', 'path', 'shard', 'shards', 'argument', 'needed', 'free', 'pid', 'written']

// An error as --json prints it: one line, {"error":{"code","message",...}}.
function errorLine (err) {
  const error = { code: err.code || 'EIO', message: describeError(err) }
  for (const prop of ERROR_PROPS) if (err[prop] !== undefined) error[prop] = err[prop]
  return JSON.stringify({ error }) + '\n'
}

// Resolves to the exit code: 0 success, 1 runtime error (or `exists` finding nothing),
// 2 usage error. `io.rawArgs`: the arguments as the kernel passed them (argv.js).
async function main (argv, io = { stdin: process.stdin, stdout: process.stdout, stderr: process.stderr }, env = process.env) {
  let store
  const run = async (name, args) => {
    const dir = path.resolve(program.opts().db || defaultDb(env))
    // A store that cannot be written, or --read-only, is opened read-only: the read
    // commands work, the others fail.
    const asked = Boolean(program.opts().readOnly)
    const reason = asked ? undefined : await notWritable(dir)
    const readOnly = asked || reason !== undefined
    if (readOnly && WRITES.has(name)) {
      const why = asked ? 'is opened with --read-only' : `cannot be written (${reason})`
      throw Object.assign(new Error(`the store at ${dir} ${why}: kfs ${name} would change it; get, exists, stat, list and verify read it`), { code: 'EROFS' })
    }
    // Only put creates a store: another command on a mistyped --db fails with ENOENT.
    // One command, then the process exits: no shard is opened ahead.
    const own = commands[name].storeOptions ? commands[name].storeOptions(args[args.length - 1]) : {}
    store = kfs(dir, { openAhead: false, ...(readOnly ? { readOnly: true } : { create: name === 'put' }), ...own })
    io.exitCode = await commands[name](store, { ...io, json }, ...args)
  }
  // Known before parsing, so that a usage error is JSON too (after `--`, a file's name).
  const given = argv.slice(2)
  const json = given.slice(0, given.includes('--') ? given.indexOf('--') : given.length).includes('--json')
  const program = buildProgram(run, env, { writeOut: (s) => io.stdout.write(s), writeErr: (s) => io.stderr.write(s), json })
  try {
    const undecodable = io.rawArgs && notUtf8(io.rawArgs, given)
    if (undecodable) throw undecodable
    await program.parseAsync(argv)
    return io.exitCode ?? 0
  } catch (err) {
    // Help asked for (--help, -h, `kfs help`) and --version exit 0; `kfs` alone prints
    // the help on stderr, a usage error.
    if (err instanceof CommanderError) return err.exitCode === 0 ? 0 : 2
    if (err.code === 'EPIPE') return 0 // the reader went away (`kfs get KEY | head`): not an error
    io.stderr.write(json ? errorLine(err) : `kfs: ${describeError(err)}\n`)
    if (env.KFS_DEBUG === '1') io.stderr.write(`${err.stack}\n`)
    return err.code === 'EINVAL' ? 2 : 1
  } finally {
    if (store) await store.close().catch(() => {})
  }
}

module.exports = { main, buildProgram }

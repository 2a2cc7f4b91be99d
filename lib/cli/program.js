'use strict'

const fs = require('node:fs/promises')
const os = require('node:os')
const path = require('node:path')
const { Command, InvalidArgumentError, CommanderError } = require('commander')
const kfs = require('../..')
const commands = require('./commands')
const { describeError, systemReason } = require('./text')
const { version } = require('../../package.json')

const defaultDb = (env) => env.KFS_DB || path.join(os.homedir(), '.kfs', 'default')

// Why the store at `dir` cannot be written by this process ('read-only file system',
// 'permission denied'...), or undefined if it can, or if there is no store there (or
// something else is wrong, which the store's open reports). Its directory, state
// directory and the state's LOCK, which LevelDB opens read-write, are what a read-write
// open needs first. Root passes the permission bits, not a read-only mount.
async function notWritable (dir) {
  for (const p of [dir, path.join(dir, 'state'), path.join(dir, 'state', 'LOCK')]) {
    const failed = await fs.access(p, fs.constants.W_OK).then(() => undefined, (err) => err)
    if (failed) return kfs.errors.NOT_WRITABLE.includes(failed.code) ? systemReason(failed) : undefined
  }
  return undefined
}

const WRITES = new Set(['put', 'unlink', 'compact', 'repair'])

function nonNegativeInteger (value) {
  if (!/^\d+$/.test(value) || !Number.isSafeInteger(Number(value))) throw new InvalidArgumentError('must be a non-negative integer.')
  return Number(value)
}

function shardNumber (value) {
  const n = nonNegativeInteger(value)
  if (n > 255) throw new InvalidArgumentError('must be a shard number from 0 to 255.')
  return n
}

// Builds the command line. `run(name, args)` is called with the command's name and its
// arguments (commander's parsed options last).
function buildProgram (run, env) {
  const program = new Command('kfs')
    .description('Store files in a kfs store: sharded, chunked and content-addressed, on LevelDB.')
    .version(version, '-V, --version', 'print the version')
    .helpOption('--help', 'show help') // -h is stat's --human
    .option('-d, --db <dir>', `the store to use (default: $KFS_DB, else ~/.kfs/default; now ${defaultDb(env)})`)
    .exitOverride()
    .configureOutput({ outputError: (message, write) => write(`kfs: ${message.replace(/^error: /, '')}`) })

  program.command('put').alias('write')
    .argument('[file]', 'the file to store; standard input when absent or "-"')
    .option('--key <key>', 'store it under this key (40 or 64 hex characters) or name instead of its SHA-256')
    .description('store a file and print its key (the SHA-256 of its content, unless --key is given)')
    .action((file, options) => run('put', [file, options]))

  program.command('get').alias('read')
    .argument('<key>', 'the key (or name) of the file')
    .argument('[file]', 'where to write it; standard output when absent or "-"')
    .option('--start <n>', 'first byte to read (default 0)', nonNegativeInteger)
    .option('--end <n>', 'last byte to read, inclusive (default: the end of the file)', nonNegativeInteger)
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
    .argument('[key]', 'the key (or name) of a file; without it, the store\'s usage per shard')
    .option('-h, --human', 'sizes in KiB, MiB, GiB...')
    .option('--json', 'print JSON')
    .description('show a file\'s size, chunks, shard, time and name, or the store\'s usage per shard')
    .action((key, options) => run('stat', [key, options]))

  program.command('list')
    .argument('[shard]', 'only this shard (0 to 255)', shardNumber)
    .option('--json', 'print one JSON object per line')
    .description('list stored files, one per line: key<TAB>size<TAB>name')
    .action((shard, options) => run('list', [shard, options]))

  program.command('verify')
    .option('--shard <n>', 'only this shard (0 to 255)', shardNumber)
    .option('--json', 'print the report as JSON')
    .description('read every stored file and check it; exit 1 if any problem is found')
    .action((options) => run('verify', [options]))

  program.command('repair')
    .argument('<shard>', 'the damaged shard (0 to 255)', shardNumber)
    .option('--json', 'print the result as JSON')
    .description('repair a damaged shard: recover what LevelDB can, drop files that cannot be recovered (listed), rebuild its accounting')
    .action((shard, options) => run('repair', [shard, options]))

  program.command('compact')
    .description('compact every shard, reclaiming the space of removed data; prints disk use before and after')
    .action(() => run('compact', []))

  return program
}

// Runs the command line and resolves to the exit code: 0 success, 1 runtime error (or
// `exists` finding nothing), 2 usage error.
async function main (argv, io = { stdin: process.stdin, stdout: process.stdout, stderr: process.stderr }, env = process.env) {
  let store
  const run = async (name, args) => {
    const dir = path.resolve(program.opts().db || defaultDb(env))
    // A store that cannot be written (a read-only mount, a backup without write
    // permission) is opened read-only: the read commands work, the others fail.
    const readOnly = await notWritable(dir)
    if (readOnly && WRITES.has(name)) {
      throw Object.assign(new Error(`the store at ${dir} cannot be written (${readOnly}): kfs ${name} would change it; get, exists, stat, list and verify read it`), { code: 'EROFS' })
    }
    // Only put creates a store: any other command on a path that holds none (a
    // mistyped --db) fails with ENOENT rather than leaving an empty store there.
    store = kfs(dir, readOnly ? { readOnly: true } : { create: name === 'put' })
    io.exitCode = await commands[name](store, io, ...args)
  }
  const program = buildProgram(run, env)
  program.configureOutput({ ...program.configureOutput(), writeOut: (s) => io.stdout.write(s), writeErr: (s) => io.stderr.write(s) })
  try {
    await program.parseAsync(argv)
    return io.exitCode ?? 0
  } catch (err) {
    if (err instanceof CommanderError) return err.code === 'commander.helpDisplayed' || err.code === 'commander.version' ? 0 : 2
    if (err.code === 'EPIPE') return 0 // the reader went away (`kfs get KEY | head`): not an error
    io.stderr.write(`kfs: ${describeError(err)}\n`)
    if (env.KFS_DEBUG === '1') io.stderr.write(`${err.stack}\n`)
    return err.code === 'EINVAL' ? 2 : 1
  } finally {
    if (store) await store.close().catch(() => {})
  }
}

module.exports = { main, buildProgram }

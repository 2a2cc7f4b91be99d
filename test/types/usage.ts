// Compiled by `npm run typecheck` (tsc --noEmit, strict), never run. Every method and
// property of the API is used here, and each result's type is asserted exactly, so a
// declaration that is wrong, missing or too loose (any) fails the compile.

import kfs = require('kfs-store')
import { Readable, Writable } from 'node:stream'

// Exact type equality: true only if A and B are the same type (any is not `Buffer`).
type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends (<T>() => T extends B ? 1 : 2) ? true : false
function assertType<A, B> (check: Equal<A, B>): void {
  void check
}

async function main (): Promise<void> {
  const options: kfs.StoreOptions = {
    referenceId: '00112233445566778899aabbccddeeff00112233',
    maxTableSize: 2 ** 40,
    chunkSize: 128 * 1024,
    shardCount: 256,
    sync: false,
    create: false,
    readOnly: false,
    diskReserve: 0,
    reclaim: true,
    maxOpenShards: 16,
    idleTimeout: 30000,
    openAhead: false,
    shardWaitTimeout: 30000,
    memory: 64 * 1024 * 1024,
    share: true,
    hold: true
  }
  const store = kfs('./store', options)
  assertType<typeof store, kfs.Store>(true)
  assertType<ReturnType<typeof kfs.kfs>, kfs.Store>(true)
  assertType<ReturnType<typeof kfs.removeShadowsSync>, void>(true)
  const other: kfs.Store = new kfs.Store('./other')
  assertType<typeof other.location, string>(true)

  // Properties
  assertType<typeof store.location, string>(true)
  assertType<typeof store.referenceId, string | undefined>(true)
  assertType<typeof store.chunkSize, number>(true)
  assertType<typeof store.shardCapacity, number | undefined>(true)
  assertType<typeof store.heldBy, number | undefined>(true)
  assertType<typeof store.takenOver, boolean>(true)
  assertType<typeof store.shardCount, number>(true)
  // @ts-expect-error location is read-only
  store.location = '/elsewhere'

  const opened = await store.open()
  assertType<typeof opened, void>(true)

  const written = await store.writeFile('name', 'text')
  assertType<typeof written, void>(true)
  await store.writeFile('name', Buffer.from('bytes'))
  await store.writeFile('name', new Uint8Array(3))
  // @ts-expect-error a number is not data
  await store.writeFile('name', 42)
  // @ts-expect-error the key is required
  await store.writeFile(Buffer.from('data'))
  await store.writeFile('name', 'text', { expires: new Date() })
  await store.writeFile('name', 'text', { expires: Date.now() + 3600000 })
  // @ts-expect-error an expiry is a Date or ms
  await store.writeFile('name', 'text', { expires: '1h' })
  assertType<Awaited<ReturnType<typeof store.put>>, string>(true)
  await store.put('data', { expires: new Date() })
  const expires = (await store.stat('name')).expires
  assertType<typeof expires, Date | undefined>(true)
  await store.trash('name')
  const restored = await store.restoreTrash()
  assertType<typeof restored.files, number>(true)
  await store.emptyTrash()
  await store.emptyTrash({ before: new Date() })
  const emptied = await store.emptyTrash({ before: Date.now() })
  assertType<typeof emptied.bytes, number>(true)
  // @ts-expect-error before is a Date or ms
  await store.emptyTrash({ before: '7d' })
  const trashUsage = (await store.usage()).trash
  assertType<typeof trashUsage.bytes, number>(true)
  const trashMetrics = (await store.metrics()).trash
  assertType<typeof trashMetrics.emptied, number>(true)
  kfs('/tmp/store', { trashDays: 1 })

  const data = await store.readFile('name')
  assertType<typeof data, Buffer>(true)

  const ws = store.createWriteStream('name', { sha256: 'ab'.repeat(32), size: 10 })
  assertType<typeof ws, Writable>(true)
  store.createWriteStream('name')
  // @ts-expect-error write streams take no range
  store.createWriteStream('name', { start: 1 })

  const rs = store.createReadStream('name', { start: 0, end: 9 })
  assertType<typeof rs, Readable>(true)
  store.createReadStream('name', { start: 5 })
  // @ts-expect-error start is a number
  store.createReadStream('name', { start: '1' })

  const key = await store.put(Buffer.from('hello'))
  assertType<typeof key, string>(true)
  await store.put('text')
  await store.put(new Uint8Array(1))
  await store.put(Readable.from([Buffer.from('streamed')]))
  // @ts-expect-error objects are not data
  await store.put({ data: 1 })

  const yes = await store.exists(key)
  assertType<typeof yes, boolean>(true)

  const stat = await store.stat(key)
  assertType<typeof stat, kfs.FileStat>(true)
  assertType<typeof stat.key, string>(true)
  assertType<typeof stat.size, number>(true)
  assertType<typeof stat.chunks, number>(true)
  assertType<typeof stat.shard, number>(true)
  assertType<typeof stat.mtime, Date>(true)
  assertType<typeof stat.sha256, string>(true)
  assertType<typeof stat.name, string | undefined>(true)

  const unlinked = await store.unlink(key)
  assertType<typeof unlinked, void>(true)

  for await (const entry of store.list()) {
    assertType<typeof entry, kfs.ListEntry>(true)
    assertType<typeof entry.key, string>(true)
    assertType<typeof entry.size, number>(true)
    assertType<typeof entry.name, string | undefined>(true)
  }
  for await (const { key: k } of store.list(3)) assertType<typeof k, string>(true)
  // @ts-expect-error a shard is a number
  store.list('3')

  const usage = await store.usage()
  assertType<typeof usage.used | typeof usage.free | typeof usage.capacity | typeof usage.files, number>(true)
  const shard: kfs.ShardUsage | undefined = usage.shards[0]
  if (shard) {
    assertType<typeof shard.index | typeof shard.used | typeof shard.free | typeof shard.files | typeof shard.diskBytes | typeof shard.reclaimable, number>(true)
  }
  assertType<typeof usage.reclaimable, number>(true)

  const metrics = await store.metrics()
  assertType<typeof metrics, kfs.Metrics>(true)
  assertType<typeof metrics.files | typeof metrics.fileBytes | typeof metrics.diskBytes | typeof metrics.reclaimableBytes | typeof metrics.memory.memtables | typeof metrics.shardsOpen, number>(true)
  const method: kfs.MethodMetrics | undefined = metrics.operations.readFile
  assertType<ReturnType<typeof kfs.metricsText>, string>(true)
  assertType<typeof kfs.METRICS_CONTENT_TYPE, string>(true)
  assertType<typeof kfs.DURATION_BUCKETS, readonly number[]>(true)
  kfs.metricsText(metrics)
  if (method) assertType<typeof method.errors.ENOENT | typeof method.seconds.buckets[0], number>(true)
  // @ts-expect-error metrics() takes no argument
  await store.metrics(1)

  const disk = await store.diskUsage()
  assertType<typeof disk, number>(true)

  const reclaimed = await store.reclaim()
  assertType<typeof reclaimed, void>(true)

  const compacted = await store.compact()
  assertType<typeof compacted, void>(true)

  const report = await store.verify({
    shard: 0,
    onProgress (progress) {
      assertType<typeof progress, kfs.VerifyProgress>(true)
      assertType<typeof progress.shard | typeof progress.files | typeof progress.bytes, number>(true)
    }
  })
  await store.verify()
  assertType<typeof report.files | typeof report.bytes, number>(true)
  for (const problem of report.problems) {
    assertType<typeof problem.shard, number>(true)
    assertType<typeof problem.key, string | null>(true)
    assertType<typeof problem.kind, 'file' | 'metadata' | 'accounting' | 'shard' | 'log' | 'write' | 'expiry' | 'trash'>(true)
    assertType<typeof problem.problem, string>(true)
  }

  const repaired = await store.repair(0)
  assertType<typeof repaired.shard | typeof repaired.files | typeof repaired.used | typeof repaired.unaccounted, number>(true)
  assertType<typeof repaired.recreated, boolean>(true)
  for (const dropped of repaired.dropped) assertType<typeof dropped.key | typeof dropped.problem, string>(true)
  for (const note of repaired.notes) {
    assertType<typeof note.at, string>(true)
    assertType<typeof note.dropped | typeof note.pending, string[]>(true)
  }
  // @ts-expect-error repair needs a shard
  await store.repair()

  const closed = await store.close()
  assertType<typeof closed, void>(true)

  // @ts-expect-error unknown options are refused
  kfs('./store', { chunksize: 1 })
  // @ts-expect-error create is a boolean
  kfs('./store', { create: 'no' })
}

// Errors: the predicates narrow to KfsError, with its code and documented fields.
function handle (err: unknown): string {
  if (kfs.errors.isNotFound(err)) {
    assertType<typeof err.code, 'ENOENT'>(true)
    assertType<typeof err.key | typeof err.path, string | undefined>(true)
    assertType<typeof err.shard, number | undefined>(true)
  }
  if (kfs.errors.isNoSpace(err) || kfs.errors.isDiskFull(err)) {
    assertType<typeof err.needed | typeof err.free, number | undefined>(true)
    assertType<typeof err.disk, boolean | undefined>(true)
  }
  if (kfs.errors.isIntegrity(err)) {
    assertType<typeof err.chunk, number | undefined>(true)
    assertType<typeof err.expected, string | undefined>(true)
    assertType<typeof err.found, string | number | undefined>(true)
  }
  if (kfs.errors.isCorrupt(err)) assertType<typeof err.shards, number[] | undefined>(true)
  if (kfs.errors.isBusy(err) || kfs.errors.isClosed(err) || kfs.errors.isInvalid(err)) return err.message
  const e = err as kfs.KfsError
  assertType<typeof e.supported | typeof e.size, number | undefined>(true)
  assertType<typeof e.argument, string | undefined>(true)
  const codes: kfs.ErrorCode[] = ['EINVAL', 'ENOENT', 'ENOSPC', 'EINTEGRITY', 'ECORRUPT', 'ENOTSUP', 'EFBIG', 'EBUSY',
    'ECANCELED', 'ECLOSED', 'ENOTDIR', 'EEXIST', 'EMFILE', 'EACCES', 'EPERM', 'EROFS', 'EIO', 'ENOMEM', 'EDQUOT']
  // @ts-expect-error not a kfs code
  const wrong: kfs.ErrorCode = 'ENOPE'
  void wrong
  switch (e.code) {
    case 'ENOTSUP': return `newer format ${e.found}, this kfs reads ${e.supported}`
    case 'EFBIG': return `too big: ${e.size}`
    case 'ETIMEDOUT': return 'other OS codes pass through'
    default: return codes.includes(e.code as kfs.ErrorCode) ? e.code : 'unknown'
  }
}

main().catch(handle)

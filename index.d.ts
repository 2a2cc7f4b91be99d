// Type declarations for kfs's public API (index.js). doc/api.md is the reference for
// behaviour; this file only states the shapes. test/types/usage.ts checks it with tsc,
// and test/readme.test.js checks that every Store method is declared here.

/// <reference types="node" />

import type { Readable, Writable } from 'node:stream'

/**
 * Returns the store at `dir` at once. It opens (and, unless `create: false`, creates)
 * the directory on its first operation. Throws EINVAL for a bad `dir` or option.
 */
declare function kfs (dir: string, options?: kfs.StoreOptions): kfs.Store

declare namespace kfs {
  /** The same function as the module itself: `const { kfs } = require('kfs-store')`. */
  const kfs: (dir: string, options?: StoreOptions) => Store

  /**
   * For a process about to be ended by a signal it handles: removes at once the shadows
   * of the stores it has open read-only, which may then fail (files LevelDB already has
   * open still read).
   */
  function removeShadowsSync (): void

  /** `store.metrics()`'s object in Prometheus's text format, version 0.0.4, as the holder serves it on GET /metrics. */
  function metricsText (metrics: Metrics): string

  /** The Content-Type of that text: `text/plain; version=0.0.4`. */
  const METRICS_CONTENT_TYPE: string

  /** The upper bounds, in seconds, of the buckets of `store.metrics()`'s durations, before the last (+Inf). */
  const DURATION_BUCKETS: readonly number[]

  /** Every code kfs raises on purpose. Codes are stable; messages may change. */
  type ErrorCode =
    | 'EINVAL'
    | 'ENOENT'
    | 'ENOSPC'
    | 'EINTEGRITY'
    | 'ECORRUPT'
    | 'ENOTSUP'
    | 'EFBIG'
    | 'EBUSY'
    | 'ECANCELED'
    | 'ECLOSED'
    | 'ENOTDIR'
    | 'EEXIST'
    | 'EMFILE'
    | 'ENFILE'
    | 'ECONNRESET'
    | 'ENOTCONN'
    | 'EACCES'
    | 'EPERM'
    | 'EROFS'
    | 'EIO'
    | 'ENOMEM'
    | 'EDQUOT'

  /**
   * An error raised by kfs: an `Error` (a `TypeError` or `RangeError` for EINVAL) with a
   * `code`. Other operating-system errors pass through with their own codes, so `code`
   * is any string, with the documented ones spelled out. The other fields are present
   * only for the codes doc/api.md names them with.
   */
  interface KfsError extends Error {
    // `string & {}` keeps ErrorCode's names for completion while accepting others.
    code: ErrorCode | (string & {})
    /** EINVAL: the argument at fault, such as `key` or `options.chunkSize`. */
    argument?: string
    /** ENOENT, EINTEGRITY, ECORRUPT (a metadata record), EFBIG: the file's key. */
    key?: string
    /** The same errors, of a file asked for by name: that name (`key` is its key). */
    fileName?: string
    /** ENOENT (no store, `create: false` or `readOnly`), ENOTDIR, ENOTSUP, EBUSY, EROFS, EACCES (another user's store, a store that could not be created): the path concerned. */
    path?: string
    /** EACCES: the ID of the user that owns the store, or the file or shard of it, that this process may not write or read. */
    owner?: number
    /** The shard concerned: ENOSPC, ECORRUPT, EBUSY, ENOENT of `repair`, OS errors. */
    shard?: number
    /** ECORRUPT from `list()` or `compact()`: every damaged shard met. */
    shards?: number[]
    /** ENOSPC: the bytes the write needed. */
    needed?: number
    /** ENOSPC: the bytes the shard had free. */
    free?: number
    /** EBUSY: the ID of the process holding the store, where /proc/locks tells. */
    pid?: number
    /** ENOSPC: true when the disk, not a shard's cap, is full. */
    disk?: boolean
    /** EIO of a synced write or unlink: true when it was made, but may not survive a power cut (its directory could not be synced). */
    written?: boolean
    /** EINTEGRITY: the index of a missing or wrong-sized chunk. */
    chunk?: number
    /** EINTEGRITY: the SHA-256 expected, in hex. */
    expected?: string
    /** EINTEGRITY: the SHA-256 found, in hex. ENOTSUP: the store's format version. */
    found?: string | number
    /** ENOTSUP: the newest format version this kfs reads. */
    supported?: number
    /** EFBIG: the file's size in bytes. */
    size?: number
  }

  interface StoreOptions {
    /** The store's ID, 40 hex characters; drives routing. Default: random. Persisted. */
    referenceId?: string
    /** Total capacity in bytes. Default 8 TiB. Persisted. */
    maxTableSize?: number
    /** Bytes per chunk, 1 to 64 MiB. Default 128 KiB. Persisted. */
    chunkSize?: number
    /** 1, 2, 4 … 256. Default 256. A benchmarking aid. Persisted. */
    shardCount?: number
    /** Resolve writes and unlinks only once durable on disk. Default false. */
    sync?: boolean
    /** When false, a directory holding no store is refused with ENOENT. Default true. */
    create?: boolean
    /** Open for reads only, writing nothing in the store; writes fail with EROFS. Default false. */
    readOnly?: boolean
    /** Bytes kept in reserve for a full disk; 0 turns it off. Default 16 MiB. */
    diskReserve?: number
    /** Reclaim the space of unlinked and overwritten files in the background. Default true. */
    reclaim?: boolean
    /** Shards open at once, 1 to 256. Default: every shard the descriptor limit allows. */
    maxOpenShards?: number
    /** Milliseconds before an unused shard closes. Default: none, idle shards stay open. */
    idleTimeout?: number
    /** Open every shard in the background once the store opened read-write. Default true; false opens each on first use (a short-lived process). */
    openAhead?: boolean
    /** Milliseconds an operation waits for a shard slot before EBUSY. Default 30000. */
    shardWaitTimeout?: number
    /** Bytes of memory for the store's data: writes not yet in LevelDB, read-ahead, and LevelDB's memtables. Default 128 MiB, at least 16 MiB. */
    memory?: number
    /** Days a file stays in the trash before the store removes it by itself, 0 to 36500 (fractions allowed). Default 7. */
    trashDays?: number
    /** Serve the store to other processes while holding it, and use a holder when another has it (default true). */
    share?: boolean
    /** false: use the store only through the process that holds it, never open it here; ENOTCONN while none does (default true). */
    hold?: boolean
  }

  /** What `writeFile` and `put` accept; strings are stored as UTF-8. */
  type Data = Buffer | Uint8Array | string

  interface FileOptions {
    /** When the file expires: from then on no reader finds it, and its space comes back by itself. A Date or ms since the epoch (whole, up to 9999999999999); a past time, before 1970 too, expires it at once. Through a holder of an older kfs, ENOTSUP. */
    expires?: Date | number
  }

  interface WriteStreamOptions extends FileOptions {
    /** 64 hex characters: the content must hash to it, or EINTEGRITY. */
    sha256?: string
    /** The file's size in bytes: claimed in its shard before anything is written (ENOSPC at once); other lengths fail with EINVAL. */
    size?: number
  }

  interface ReadStreamOptions {
    /** First byte, inclusive. Default 0. */
    start?: number
    /** Last byte, inclusive; clamped to the end of the file. */
    end?: number
  }

  interface FileStat {
    key: string
    size: number
    chunks: number
    shard: number
    mtime: Date
    /** The content's SHA-256 in hex. */
    sha256: string
    /** Present only for named keys. */
    name?: string
    /** Present only for a file written with an expiry. */
    expires?: Date
  }

  interface ListEntry {
    key: string
    size: number
    /** Present only for named keys. */
    name?: string
  }

  interface ShardUsage {
    index: number
    used: number
    free: number
    files: number
    /** LevelDB's approximate size of the shard's tables, and its logs' bytes (writes not yet in a table). */
    diskBytes: number
    /** Bytes of removed and replaced versions whose space is not given back yet. */
    reclaimable: number
    /** Its files in the trash and their bytes (counted in `files` and `used` too). */
    trash: TrashFigures
  }

  /** Files in the trash, or brought back or removed from it, and their bytes. */
  interface TrashFigures {
    files: number
    bytes: number
  }

  interface EmptyTrashOptions {
    /** Remove the files trashed before this time (a Date or ms since the epoch). Default: every file in the trash. */
    before?: Date | number
  }

  interface Usage {
    used: number
    free: number
    capacity: number
    files: number
    /** Bytes of removed and replaced versions whose space is not given back yet, all shards. */
    reclaimable: number
    /** Bytes of the disk reserve now on disk (the `diskReserve` option; 0 while a full disk has it given up). */
    reserve: number
    /** Files in the trash and their bytes, all shards (counted in `files` and `used` too). */
    trash: TrashFigures
    /** Only the shards created so far. */
    shards: ShardUsage[]
  }

  /** One method's calls in Metrics: see doc/api.md, "Metrics". */
  interface MethodMetrics {
    /** Calls that ended, failed or not. */
    count: number
    /** Calls that failed, by error code (`UNKNOWN` for an error without one). */
    errors: Record<string, number>
    /** Their durations: the sum, and how many took at most each bound of DURATION_BUCKETS (cumulative), then all (= count). */
    seconds: { sum: number, buckets: number[] }
  }

  /** store.metrics(): the holder's figures; see doc/api.md, "Metrics", for each. */
  interface Metrics {
    files: number
    fileBytes: number
    capacityBytes: number
    diskBytes: number
    reclaimableBytes: number
    reserveBytes: number
    shards: number
    shardsOpen: number
    shardsUncounted: number
    memory: { budget: number, write: number, readahead: number, memtables: number }
    shardOpens: number
    shardCloses: number
    flushes: { budget: number, quiet: number }
    reclaims: { runs: number, pieces: number }
    /** Collections of expired files that removed some, and the files they removed. */
    expiries: { runs: number, files: number }
    /** Files in the trash and their bytes; `emptied`: files the store removed from it by itself (trashDays). */
    trash: { files: number, bytes: number, emptied: number }
    clients: number
    /** By method: writeFile, readFile, createWriteStream, createReadStream, put, exists, stat, unlink, list, usage, diskUsage, reclaim, compact, verify, repair, trash, restoreTrash, emptyTrash. */
    operations: Record<string, MethodMetrics>
  }

  interface VerifyProgress {
    shard: number
    files: number
    bytes: number
  }

  interface VerifyOptions {
    /** Only this shard. */
    shard?: number
    /** Called after each file checked; what it throws ends the check and verify rejects with it. */
    onProgress?: (progress: VerifyProgress) => void
  }

  /** What a verify problem is about; see doc/api.md for each. */
  type VerifyProblemKind = 'file' | 'metadata' | 'accounting' | 'shard' | 'log' | 'write' | 'expiry' | 'trash'

  interface VerifyProblem {
    shard: number
    /** null for a problem of a whole shard. */
    key: string | null
    kind: VerifyProblemKind
    problem: string
  }

  interface VerifyReport {
    files: number
    bytes: number
    problems: VerifyProblem[]
  }

  interface DroppedFile {
    key: string
    problem: string
  }

  /** A damage note repair cleared: what LevelDB dropped from a damaged log. */
  interface RepairNote {
    /** When the shard was opened and the damage found, as an ISO date. */
    at: string
    dropped: string[]
    /** Keys whose writes were in flight then. */
    pending: string[]
  }

  interface RepairResult {
    shard: number
    /** Files kept. */
    files: number
    /** Bytes kept. */
    used: number
    dropped: DroppedFile[]
    /** Files kept whose lost head or metadata record was made again from the other. */
    remade: DroppedFile[]
    notes: RepairNote[]
    /** Files that left no trace at all. */
    unaccounted: number
    /** True when the shard's directory was gone and an empty shard took its place. */
    recreated: boolean
  }

  class Store {
    constructor (dir: string, options?: StoreOptions)

    /** The store's directory, absolute. */
    readonly location: string
    /** After open: the store's reference ID in hex. */
    readonly referenceId: string | undefined
    /** The persisted chunk size once open; the chosen one before. */
    readonly chunkSize: number
    /** After open: each shard's cap in bytes. */
    readonly shardCapacity: number | undefined
    /** The persisted shard count once open; the chosen one before. */
    readonly shardCount: number
    /** After open: the process ID of the process that holds the store, this one's or that of the one it is used through (`share`). */
    readonly heldBy: number | undefined
    /** Whether this store, opened here, took the store over from a holder that ended without closing it (killed, crashed). */
    readonly takenOver: boolean
    /** 'opening' until an open succeeded, then 'open'; 'closing' from close() on, 'closed' once done. */
    readonly status: 'opening' | 'open' | 'closing' | 'closed'

    open (): Promise<void>
    writeFile (key: string, data: Data, options?: FileOptions): Promise<void>
    readFile (key: string): Promise<Buffer>
    createWriteStream (key: string, options?: WriteStreamOptions): Writable
    createReadStream (key: string, options?: ReadStreamOptions): Readable
    /** Stores the content under its SHA-256 and resolves to that key in hex. */
    put (data: Data | Readable, options?: FileOptions): Promise<string>
    exists (key: string): Promise<boolean>
    stat (key: string): Promise<FileStat>
    unlink (key: string): Promise<void>
    /** Puts the file in the trash: no reader finds it until restoreTrash(); ENOENT if none does now. */
    trash (key: string): Promise<void>
    /** Brings every file in the trash back; resolves to what it brought back. */
    restoreTrash (): Promise<TrashFigures>
    /** Removes for good the files trashed before `before` (every one without it); resolves to what it removed. */
    emptyTrash (options?: EmptyTrashOptions): Promise<TrashFigures>
    list (shard?: number): AsyncGenerator<ListEntry, void, undefined>
    usage (): Promise<Usage>
    /** The figures of the process that holds the store, kept as they change: no shard opened. */
    metrics (): Promise<Metrics>
    /** Bytes of the store's files on disk, leaving out the disk reserve. */
    diskUsage (): Promise<number>
    /** Gives back now the space of removed and replaced files noted in the open shards. */
    reclaim (): Promise<void>
    compact (): Promise<void>
    verify (options?: VerifyOptions): Promise<VerifyReport>
    repair (shard: number): Promise<RepairResult>
    close (): Promise<void>
  }

  /**
   * Predicates on errors. The module also exports the factories kfs raises its errors
   * with; they are internal and not declared here.
   */
  namespace errors {
    function isNotFound (err: unknown): err is KfsError & { code: 'ENOENT' }
    function isNoSpace (err: unknown): err is KfsError & { code: 'ENOSPC' }
    /** ENOSPC from the filesystem filling up, rather than a shard's cap. */
    function isDiskFull (err: unknown): err is KfsError & { code: 'ENOSPC' }
    function isIntegrity (err: unknown): err is KfsError & { code: 'EINTEGRITY' }
    function isCorrupt (err: unknown): err is KfsError & { code: 'ECORRUPT' }
    function isBusy (err: unknown): err is KfsError & { code: 'EBUSY' }
    function isClosed (err: unknown): err is KfsError & { code: 'ECLOSED' }
    function isInvalid (err: unknown): err is KfsError & { code: 'EINVAL' }
  }
}

export = kfs

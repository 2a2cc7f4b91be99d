'use strict'

const { DURATION_BUCKETS } = require('./metrics')

// store.metrics() in Prometheus's text exposition format, version 0.0.4: what the holder
// serves on GET /metrics (share/server.js). doc/api.md, "Metrics", gives every name.
const CONTENT_TYPE = 'text/plain; version=0.0.4'

// [name, type, help, value(metrics)]: a value is a number, or [labels, number] pairs.
const FAMILIES = [
  ['kfs_files', 'gauge', 'Files stored.', (m) => m.files],
  ['kfs_file_bytes', 'gauge', 'Bytes of the files stored.', (m) => m.fileBytes],
  ['kfs_capacity_bytes', 'gauge', 'Bytes the shards may hold in all: shard capacity times shard count.', (m) => m.capacityBytes],
  ['kfs_disk_bytes', 'gauge', 'Bytes of the shards\' LevelDB tables and logs on disk.', (m) => m.diskBytes],
  ['kfs_reclaimable_bytes', 'gauge', 'Bytes of removed versions whose space is not given back yet.', (m) => m.reclaimableBytes],
  ['kfs_reserve_bytes', 'gauge', 'Bytes of the disk reserve in place (0 while given up).', (m) => m.reserveBytes],
  ['kfs_shards', 'gauge', 'Shards made.', (m) => m.shards],
  ['kfs_shards_open', 'gauge', 'Shards open.', (m) => m.shardsOpen],
  ['kfs_shards_uncounted', 'gauge', 'Shards whose cached figures are not trusted (a crash, or an older kfs, left them): counted as 0 until opened.', (m) => m.shardsUncounted],
  ['kfs_memory_bytes', 'gauge', 'Bytes of the memory budget in use, by part.', (m) => [
    [{ part: 'write' }, m.memory.write],
    [{ part: 'readahead' }, m.memory.readahead],
    [{ part: 'memtables' }, m.memory.memtables]
  ]],
  ['kfs_memory_budget_bytes', 'gauge', 'The store\'s memory budget (the memory option).', (m) => m.memory.budget],
  ['kfs_clients', 'gauge', 'Connections of other processes open on the holder\'s socket.', (m) => m.clients],
  ['kfs_shard_opens_total', 'counter', 'Shards opened.', (m) => m.shardOpens],
  ['kfs_shard_closes_total', 'counter', 'Shards closed.', (m) => m.shardCloses],
  ['kfs_flushes_total', 'counter', 'Memtable flushes kfs started, by reason.', (m) => [
    [{ reason: 'budget' }, m.flushes.budget],
    [{ reason: 'quiet' }, m.flushes.quiet]
  ]],
  ['kfs_reclaim_runs_total', 'counter', 'Runs of reclaiming that found removed versions\' space to give back.', (m) => m.reclaims.runs],
  ['kfs_reclaim_pieces_total', 'counter', 'Key ranges compacted by reclaiming.', (m) => m.reclaims.pieces],
  ['kfs_expiry_runs_total', 'counter', 'Collections of expired files that removed some.', (m) => m.expiries.runs],
  ['kfs_expired_files_total', 'counter', 'Expired files removed by the store.', (m) => m.expiries.files],
  ['kfs_trash_files', 'gauge', 'Files in the trash.', (m) => m.trash.files],
  ['kfs_trash_bytes', 'gauge', 'Bytes of the files in the trash.', (m) => m.trash.bytes],
  ['kfs_trash_emptied_files_total', 'counter', 'Files removed from the trash by trashDays.', (m) => m.trash.emptied],
  ['kfs_operations_total', 'counter', 'Calls of the store\'s methods that ended, by method.', (m) => perMethod(m, (op, o) => [[{ op }, o.count]])],
  ['kfs_errors_total', 'counter', 'Calls that failed, by method and error code.', (m) => perMethod(m, (op, o) => Object.entries(o.errors).map(([code, n]) => [{ op, code }, n]))]
]

function perMethod (metrics, samples) {
  return Object.entries(metrics.operations).flatMap(([op, o]) => samples(op, o))
}

// The text of `metrics` (store.metrics()'s object).
function metricsText (metrics) {
  const lines = []
  for (const [name, type, help, value] of FAMILIES) {
    lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`)
    const v = value(metrics)
    if (Array.isArray(v)) for (const [labels, n] of v) lines.push(`${name}${labelText(labels)} ${n}`)
    else lines.push(`${name} ${v}`)
  }
  durations(lines, metrics.operations)
  return lines.join('\n') + '\n'
}

function durations (lines, operations) {
  const name = 'kfs_operation_duration_seconds'
  lines.push(`# HELP ${name} How long calls of the store's methods took, by method.`, `# TYPE ${name} histogram`)
  for (const [op, { count, seconds }] of Object.entries(operations)) {
    seconds.buckets.forEach((n, i) => {
      const le = i < DURATION_BUCKETS.length ? String(DURATION_BUCKETS[i]) : '+Inf'
      lines.push(`${name}_bucket${labelText({ op, le })} ${n}`)
    })
    lines.push(`${name}_sum${labelText({ op })} ${seconds.sum}`, `${name}_count${labelText({ op })} ${count}`)
  }
}

function labelText (labels) {
  const pairs = Object.entries(labels).map(([k, v]) => `${k}="${String(v).replace(/[\\"\n]/g, (c) => (c === '\n' ? '\\n' : `\\${c}`))}"`)
  return `{${pairs.join(',')}}`
}

module.exports = { metricsText, CONTENT_TYPE }

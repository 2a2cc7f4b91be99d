'use strict'

const records = require('./records')

// Reads of a shard's records, one key range each (doc/format.md): `db` is the shard's
// LevelDb. Each reads from one snapshot and holds nothing once it resolves.

const scan = (db, range, options = {}) => db.scan({ ...range, valueAsBuffer: false, ...options })

// The keys of the files the shard holds (keys only).
async function * storedKeys (db) {
  for await (const entry of scan(db, records.metaRange(), { values: false })) yield entry.key.slice(records.META.length)
}

// Up to `limit` metadata records with keys after `after` (from the start without it).
// A record that cannot be decoded comes as { key, error } and does not hide the rest.
async function metaPage (db, shard, after, limit) {
  const range = records.metaRange()
  if (after !== undefined) range.gt = records.metaKey(after)
  const page = []
  for await (const entry of scan(db, range, { limit })) page.push(metaEntry(entry.key, entry.value, shard))
  return page
}

// The metadata record `value` stored under `metaKey`, decoded, or { key, error }.
function metaEntry (metaKey, value, shard) {
  const key = metaKey.slice(records.META.length)
  try {
    return records.decodeMeta(value, shard, key)
  } catch (error) {
    return { key, error }
  }
}

// The keys of head records (format 3) for which the metadata scan found no metadata
// record, in key order: candidates, as the two scans are two snapshots (keys only).
async function * headsWithoutMeta (db) {
  const metas = scan(db, records.metaRange(), { values: false })
  let meta = await metas.next()
  try {
    for await (const entry of scan(db, records.FILES, { values: false })) {
      if (entry.key.includes(' ')) continue // a chunk
      while (!meta.done && meta.value.key.slice(records.META.length) < entry.key) meta = await metas.next()
      if (meta.done || meta.value.key.slice(records.META.length) !== entry.key) yield entry.key
    }
  } finally {
    await metas.return()
  }
}

// Versions being written, or abandoned: [{ key, version }].
async function pendingVersions (db) {
  const pending = []
  for await (const entry of scan(db, records.pendingRange())) {
    pending.push({ key: entry.value, version: entry.key.slice(records.PENDING.length) })
  }
  return pending
}

// Removed versions whose space is still to be reclaimed, in key order:
// [{ id (the note's key), prefix: '<key> <version>', bytes }].
async function deadVersions (db) {
  const dead = []
  for await (const entry of scan(db, records.deadRange())) {
    dead.push({ id: entry.key, prefix: entry.key.slice(records.DEAD.length), bytes: Number(entry.value) || 0 })
  }
  return dead
}

// What LevelDB dropped from damaged logs when the shard was opened, as noted then:
// [{ id, at, dropped: [lines of LevelDB's LOG], pending: [keys whose writes were cut] }].
async function damageNotes (db) {
  const notes = []
  for await (const entry of scan(db, records.damageRange())) notes.push({ id: entry.key, ...records.decodeNote(entry.value) })
  return notes
}

module.exports = { storedKeys, metaPage, metaEntry, headsWithoutMeta, pendingVersions, deadVersions, damageNotes }

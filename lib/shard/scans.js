'use strict'

const records = require('./records')

// Reads of a shard's records, one key range each (doc/format.md), from the shard's LevelDb
// `db`. Each reads one snapshot and holds nothing once it resolves.
const scan = (db, range, options = {}) => db.scan({ ...range, valueAsBuffer: false, ...options })

async function * storedKeys (db) {
  for await (const entry of scan(db, records.metaRange(), { values: false })) yield entry.key.slice(records.META.length)
}

// Up to `limit` metadata records after the key `after`. A record that cannot be decoded comes
// as { key, error } and does not hide the rest.
async function metaPage (db, shard, after, limit) {
  const range = records.metaRange()
  if (after !== undefined) range.gt = records.metaKey(after)
  const page = []
  for await (const entry of scan(db, range, { limit })) page.push(metaEntry(entry.key, entry.value, shard))
  return page
}

function metaEntry (metaKey, value, shard) {
  const key = metaKey.slice(records.META.length)
  try {
    return records.decodeMeta(value, shard, key)
  } catch (error) {
    return { key, error }
  }
}

// The keys of head records the metadata scan found no record for: candidates, as the two scans
// are two snapshots.
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

// The earliest time in the expiry index, or undefined.
async function firstExpiry (db) {
  for await (const entry of scan(db, records.expiryRange(), { values: false, limit: 1 })) return records.parseExpiryKey(entry.key).expires
  return undefined
}

// The earliest trash time after `restoredAt`, or undefined.
async function firstTrash (db, restoredAt) {
  for await (const entry of scan(db, records.trashRange(restoredAt), { values: false, limit: 1 })) return records.parseTrashKey(entry.key).trashed
  return undefined
}

// The files in the trash, trashed after `restoredAt`: { files, bytes, first, last, restoredAt }.
async function trashFigures (db, restoredAt) {
  const trash = records.noTrash(restoredAt)
  for await (const entry of scan(db, records.trashRange(restoredAt))) {
    trash.last = records.parseTrashKey(entry.key).trashed
    if (trash.first === undefined) trash.first = trash.last
    trash.files++
    trash.bytes += Number(entry.value) || 0
  }
  return trash
}

// Versions being written, or abandoned: [{ key, version }].
async function pendingVersions (db) {
  const pending = []
  for await (const entry of scan(db, records.pendingRange())) {
    pending.push({ key: entry.value, version: entry.key.slice(records.PENDING.length) })
  }
  return pending
}

// The dead notes, in key order: [{ id (the note's key), prefix: '<key> <version>', bytes }].
async function deadVersions (db) {
  const dead = []
  for await (const entry of scan(db, records.deadRange())) {
    dead.push({ id: entry.key, prefix: entry.key.slice(records.DEAD.length), bytes: Number(entry.value) || 0 })
  }
  return dead
}

// The damage notes: [{ id, at, dropped: [lines of LevelDB's LOG], pending: [keys cut] }].
async function damageNotes (db) {
  const notes = []
  for await (const entry of scan(db, records.damageRange())) notes.push({ id: entry.key, ...records.decodeNote(entry.value) })
  return notes
}

module.exports = { storedKeys, metaPage, metaEntry, headsWithoutMeta, firstExpiry, firstTrash, trashFigures, pendingVersions, deadVersions, damageNotes }

'use strict'

const records = require('./records')

// A shard's files in the trash, counted as they go in and out: { files, bytes, first, last
// (the earliest and latest trash times) }, relative to the store's restore time, `clock.restoredAt` (the
// store's trash clock, maintenance/trash.js: { restoredAt, trashMs }). A restore moves
// that time past every file counted, which empties the count with no write here.
class TrashCount {
  #figures // { files, bytes, first, last, restoredAt (the restore they follow) }

  constructor (clock, figures) {
    this.clock = clock
    this.#figures = figures || records.noTrash(clock.restoredAt)
  }

  get restoredAt () {
    return this.clock.restoredAt
  }

  figures () {
    if (this.#figures.restoredAt !== this.clock.restoredAt) this.#figures = records.noTrash(this.clock.restoredAt)
    return this.#figures
  }

  // The earlier of `nextExpiry` and when trash here turns trashMs old, and the collector
  // empties it; undefined: neither.
  dueWith (nextExpiry) {
    const { first } = this.figures()
    const emptied = first === undefined ? undefined : first + this.clock.trashMs
    if (!Number.isFinite(emptied)) return nextExpiry
    return nextExpiry === undefined ? emptied : Math.min(nextExpiry, emptied)
  }

  // `meta`'s version went in the trash at `time`; true if it is now the earliest.
  added (meta, time) {
    if (time <= this.restoredAt) return false
    const trash = this.figures()
    trash.files++
    trash.bytes += meta.size
    if (!(trash.last >= time)) trash.last = time
    if (trash.first !== undefined && trash.first <= time) return false
    trash.first = time
    return true
  }

  // `meta`'s version left the shard (removed or replaced): out of the count if it was in.
  removed (meta) {
    if (!records.trashed(meta, this.restoredAt)) return
    const trash = this.figures()
    trash.files--
    trash.bytes -= meta.size
    if (trash.files === 0) Object.assign(trash, { first: undefined, last: undefined })
  }
}

module.exports = { TrashCount }

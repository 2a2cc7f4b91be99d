'use strict'

const records = require('./records')

// A shard's bytes on disk: LevelDB's tables, and its log (an open shard's recent writes are
// only there). Reading them lists its directory, so the figure is kept and read again only
// when asked to be newer.
class DiskBytes {
  #db
  #last = { bytes: 0, at: -Infinity, mark: undefined } // when (performance.now()), at which db.changeMark()

  constructor (db) {
    this.#db = db
  }

  // `maxAge`: how old, in ms, the figure may be; `sinceChange`: read again as well once
  // this process wrote or compacted the shard since.
  async read ({ maxAge = 0, sinceChange = false } = {}) {
    const at = performance.now()
    const mark = this.#db.changeMark()
    if (at - this.#last.at > maxAge || (sinceChange && (mark === undefined || mark !== this.#last.mark))) {
      const [tables, logs] = await Promise.all([this.#db.approximateSize(records.WHOLE.from, records.WHOLE.to).catch(() => 0), this.#db.logBytes()])
      this.#last = { bytes: tables + logs, at, mark }
    }
    return this.#last.bytes
  }
}

module.exports = { DiskBytes }

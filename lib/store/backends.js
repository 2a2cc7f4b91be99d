'use strict'

const fs = require('node:fs/promises')
const errors = require('../api/errors')
const { checkOptions } = require('../dir/format')
const storeDir = require('../dir/store-dir')
const { Remote } = require('../share/client')
const { CLOSING } = require('../share/failures')
const { socketPath } = require('../share/protocol')
const { RETRIES, NEVER, again } = require('../share/retries')
const { CONNECT_MS, CONNECT_FLOOR_MS, retryDelay } = require('../share/timeouts')
const { unreachedWhy } = require('../share/unreached')

// Where a Store's calls go: the store opened here (local.js), or the process that holds
// it (a Remote, lib/share/client.js), both with the same calls. The one place that
// switches: as the store opens, and once the holder was lost (it closed, crashed or was
// killed), when the next call opens it again: this process takes it over, or reaches the
// next holder. `shared`: what the Store keeps whichever backend it uses (store.js).
class Backends {
  #shared
  #onOpen
  #opening
  #local
  #remote
  #remotes = new Set() // every Remote used, closed at close()
  format // the last backend's, which outlives a lost holder

  constructor (shared, onOpen) {
    this.#shared = shared
    this.#onOpen = onOpen
  }

  get local () {
    return this.#local
  }

  get current () {
    return this.#local || this.#remote
  }

  // A failed open is not remembered: the next call tries again.
  open () {
    if (this.#closed()) return Promise.reject(errors.closed())
    if (!this.#opening) {
      this.#opening = this.#open().catch((err) => {
        this.#opening = undefined
        throw err
      })
    }
    return this.#opening
  }

  // Opens the store here, or reaches the process that holds it. Until CONNECT_MS passed,
  // either is tried again while neither works: the holder may be starting (its socket
  // not yet there), or just gone, its lock free (others may be opening it at the same
  // moment: storeDir.OPEN_AGAIN).
  async #open () {
    const { location, given, options } = this.#shared
    if (!options.hold) return this.#reach()
    if (options.share && await this.#heldElsewhere()) return
    let deadline = Date.now() + CONNECT_MS
    let unreached // the last failure to reach a holder
    let opened
    while (!opened) {
      try {
        opened = await storeDir.openStoreDir(location, given, options)
      } catch (err) {
        if (err[storeDir.OPEN_AGAIN] && Date.now() < deadline && !this.#closed()) {
          await retryDelay() // another process opened it at the same moment
          continue
        }
        if (err.code !== 'EBUSY' || err.shard !== undefined) throw err
        const remote = options.share && await this.#connect(deadline).catch((failure) => { unreached = failure })
        if (remote) return this.#use(remote)
        // A holder that says it is closing is finishing its requests: the store is
        // free once it closed, however long that takes.
        if (unreached && unreached[CLOSING]) deadline = Math.max(deadline, Date.now() + CONNECT_MS)
        if (!options.share || Date.now() >= deadline || this.#closed()) throw await storeDir.busy(location, err, { shared: options.share, why: unreached && await unreachedWhy(location, unreached) })
        await retryDelay()
      }
    }
    return this.#hold(opened)
  }

  // Whether the process whose socket is in the store answered first, now used: a store
  // beside a node is found held, and trying it first spares reading the store's files and
  // the kernel's lock table (about 5 ms of a short command's CPU). Anything else, even a
  // holder that is closing, is left to #open()'s loop.
  async #heldElsewhere () {
    const { location, given } = this.#shared
    const socket = socketPath(location)
    if (!(await fs.lstat(socket).then((stat) => stat.isSocket(), () => false))) return false
    const remote = await this.#connect(Date.now() + CONNECT_FLOOR_MS).catch(() => undefined)
    if (!remote) return false
    try {
      checkOptions(given, remote.format) // as opening the store here would have
    } catch (err) {
      remote.close()
      throw err
    }
    this.#use(remote)
    return true
  }

  // The local backend (the shards, LevelDB and its binding: most of what a process
  // loads of kfs) is loaded only here: a process that uses the store through its holder,
  // as a short `kfs` command does, never loads it.
  async #hold (opened) {
    const { LocalStore } = require('./local')
    const local = await LocalStore.open(opened, this.#shared)
    this.format = local.format
    this.#local = local
    await local.serve()
    if (!this.#closed()) this.#onOpen()
  }

  // hold: false: the process that holds the store, or ENOTCONN; never the store itself,
  // nor its lock, so that a process starting meanwhile holds it.
  async #reach () {
    const { location } = this.#shared
    const remote = await this.#connect(Date.now() + CONNECT_MS).catch(async (unreached) => {
      await storeDir.checkStore(location)
      throw errors.notHeld(location, await unreachedWhy(location, unreached), unreached)
    })
    this.#use(remote)
  }

  #connect (deadline) {
    return Remote.connect(socketPath(this.#shared.location), {
      timeout: Math.max(CONNECT_FLOOR_MS, deadline - Date.now()),
      onLost: (gone) => this.#lost(gone)
    })
  }

  #use (remote) {
    this.#remotes.add(remote)
    this.format = remote.format
    this.#remote = remote
    if (!this.#closed()) this.#onOpen()
  }

  // The holder went away: the next call opens the store again.
  #lost (remote) {
    if (this.#remote !== remote || this.#closed()) return
    this.#remote = undefined
    this.#opening = undefined
  }

  #closed () {
    return this.#shared.operations.closed
  }

  // call(backend), once the store is open. Through a holder, a failed call is made again
  // as RETRIES (lib/share/retries.js) says of `name`, through the next holder or here,
  // until CONNECT_MS after its first failure.
  async run (name, call) {
    let deadline
    for (;;) {
      if (!this.#local && !this.#remote) await this.open() // #open() sets one of them last
      const remote = this.#remote
      if (!remote) return call(this.#local)
      try {
        return await call(remote)
      } catch (err) {
        deadline = await this.#retried(err, RETRIES[name], remote, deadline)
      }
    }
  }

  // The backend's list(only, options), made again as run() makes a call until it gave
  // its first file.
  async * list (only, options) {
    let deadline
    for (;;) {
      if (!this.#local && !this.#remote) await this.open()
      const remote = this.#remote
      if (!remote) return yield * this.#local.list(only, options)
      let yielded = false
      try {
        for await (const file of remote.list(only)) {
          if (this.#closed()) throw errors.closed()
          yielded = true
          yield file
        }
        return
      } catch (err) {
        if (this.#closed()) throw errors.closed()
        deadline = await this.#retried(err, yielded ? NEVER : RETRIES.list, remote, deadline)
      }
    }
  }

  // Throws `err` unless the call is made again, and resolves to the time until which it
  // is. Only the first attempt again is made at once: no busy loop on a failing holder.
  async #retried (err, retry, remote, deadline) {
    if (this.#closed() || !again(err, retry) || Date.now() >= (deadline || Infinity)) throw err
    this.#lost(remote)
    if (deadline) await retryDelay()
    return deadline || Date.now() + CONNECT_MS
  }

  // Undefined where the store is used through a holder, or was never opened; else a
  // promise of the store opened here, if so, once the open under way ended.
  openedHere () {
    const opening = this.#opening
    if (!opening || this.#remote) return undefined
    return opening.then(() => (this.#remote ? undefined : this.#local), () => undefined)
  }

  // Ends every request still open through a holder (a listing a caller stopped reading).
  closeRemotes () {
    for (const remote of this.#remotes) remote.close()
  }
}

module.exports = { Backends }

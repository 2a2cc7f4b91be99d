'use strict'

const fs = require('node:fs')
const path = require('node:path')
const crypto = require('node:crypto')
const { Transform } = require('node:stream')
const { pipeline } = require('node:stream/promises')
const { contentHash } = require('../api/keys')
const errors = require('../api/errors')

// put(readable) needs the content's hash to know the key, and so the shard: the input is
// spooled to a file in tmp/ while hashed. Resolves to { file, size, sha256 }.
async function spool (readable, { tmpDir, cap, signal }) {
  const file = path.join(tmpDir, `put-${crypto.randomBytes(8).toString('hex')}`)
  const hash = contentHash()
  let size = 0
  const out = fs.createWriteStream(file)
  try {
    await pipeline(readable, new Transform({
      // Object-mode sources may yield strings; anything else is not file content.
      writableObjectMode: true,
      transform (chunk, encoding, callback) {
        if (typeof chunk === 'string') chunk = Buffer.from(chunk, encoding === 'buffer' ? 'utf8' : encoding)
        else if (chunk instanceof Uint8Array && !Buffer.isBuffer(chunk)) chunk = Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength)
        else if (!Buffer.isBuffer(chunk)) return callback(errors.invalidType('data', 'a stream of Buffers, Uint8Arrays or strings', chunk))
        size += chunk.length
        if (size > cap) return callback(errors.tooLarge(size, cap))
        hash.update(chunk)
        callback(null, chunk)
      }
    }), out, { signal })
    return { file, size, sha256: hash.digest('hex') }
  } catch (err) {
    await remove(file, out)
    throw err
  }
}

// On failure the spool may still be opening: remove it only once it is closed.
async function remove (file, out) {
  if (out && !out.closed) await new Promise((resolve) => out.once('close', resolve))
  await fs.promises.rm(file, { force: true })
}

module.exports = { spool, remove }

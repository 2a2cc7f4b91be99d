'use strict'

const { expect } = require('chai')
const { Readable, Writable } = require('node:stream')
const { pipeline } = require('node:stream/promises')
const { useTmp, rejects, throws, bytes, sha256, collect, assertNoStrayChunks, damageChunk } = require('./helpers')

const C = 1024

async function readAll (stream) {
  return Buffer.concat(await collect(stream))
}

// Pieces of irregular sizes, so chunk boundaries fall inside writes.
function * pieces (data, sizes = [1, 700, 1500, 3, 4096]) {
  for (let offset = 0, i = 0; offset < data.length; i++) {
    const size = sizes[i % sizes.length]
    yield data.subarray(offset, offset + size)
    offset += size
  }
}

describe('streams', () => {
  const t = useTmp()

  describe('createWriteStream', () => {
    it('commits when the stream finishes: after pipeline, the file is complete', async () => {
      const store = t.open({ chunkSize: C })
      const data = bytes(13 * C + 17)
      const ws = store.createWriteStream('streamed')
      await pipeline(Readable.from(pieces(data)), ws)
      expect((await store.readFile('streamed')).equals(data)).to.equal(true)
      expect(await store.stat('streamed')).to.include({ size: data.length, chunks: 14 })
    })

    it('writes an empty file when nothing is written', async () => {
      const store = t.open()
      await pipeline(Readable.from([]), store.createWriteStream('nothing'))
      expect(await store.stat('nothing')).to.include({ size: 0, chunks: 0 })
    })

    it('makes nothing visible before finish, and leaves no trace when destroyed', async () => {
      const store = t.open({ chunkSize: C })
      await store.writeFile('kept', 'previous')
      const ws = store.createWriteStream('kept')
      for (const piece of pieces(bytes(20 * C))) await new Promise((resolve) => ws.write(piece, resolve))
      expect((await store.readFile('kept')).toString()).to.equal('previous')
      expect(await store.exists('kept')).to.equal(true)
      expect((await collect(store.list())).map((e) => e.size)).to.deep.equal([8])
      ws.destroy()
      await new Promise((resolve) => ws.once('close', resolve))
      expect((await store.readFile('kept')).toString()).to.equal('previous')
      expect(await store.usage()).to.include({ used: 8, files: 1 })
      await store.close()
      await assertNoStrayChunks(t.dir)
    })

    it('a buffer reused after its write callback is stored as it was written', async () => {
      const store = t.open({ chunkSize: C })
      const ws = store.createWriteStream('reuse')
      const buf = Buffer.alloc(3 * C, 'a') // whole chunks, used in place while write() runs
      const part = Buffer.alloc(C / 2, 'p') // a partial chunk
      for (const b of [buf, part]) await new Promise((resolve, reject) => ws.write(b, (err) => (err ? reject(err) : resolve())))
      buf.fill('b')
      part.fill('q')
      await new Promise((resolve, reject) => ws.end(Buffer.alloc(C, 'c'), (err) => (err ? reject(err) : resolve())))
      const expected = Buffer.concat([Buffer.alloc(3 * C, 'a'), Buffer.alloc(C / 2, 'p'), Buffer.alloc(C, 'c')])
      expect((await store.readFile('reuse')).equals(expected)).to.equal(true)
    })

    it('destroyed while finishing, before its commit: nothing is committed', async () => {
      const store = t.open()
      await store.writeFile('k', 'old')
      // The stream is destroyed the moment its commit starts (_final, once every write
      // is done), so the timing is fixed rather than raced: the destroy flags the writer
      // as aborting at once, and the commit, which asks that flag when its turn comes,
      // refuses. Sizes: no chunk, part of one, and several batches left to flush.
      for (const size of [0, 5, 3 * 1024 * 1024 + 5]) {
        const ws = store.createWriteStream('k')
        const final = ws._final
        let finalCalled = false
        ws._final = function (callback) {
          finalCalled = true
          final.call(this, callback)
          this.destroy(new Error('cancelled by caller'))
        }
        const events = []
        ws.on('finish', () => events.push('finish'))
        ws.on('error', (err) => events.push(err.message))
        await new Promise((resolve) => {
          ws.on('close', resolve)
          ws.end(bytes(size))
        })
        expect(finalCalled, `size ${size}`).to.equal(true)
        // The stream reports its own destroy error and never finishes; the previous
        // version stays, whole, and nothing of this one is accounted.
        expect(events, `size ${size}`).to.deep.equal(['cancelled by caller'])
        expect((await store.readFile('k')).toString(), `size ${size}`).to.equal('old')
        expect(await store.usage(), `size ${size}`).to.include({ used: 3, files: 1 })
      }
      await store.close()
      await assertNoStrayChunks(t.dir)
    })

    it('an error midway rolls back, and a new file never appears', async () => {
      const store = t.open({ chunkSize: C })
      const source = new Readable({
        read () {
          this.push(bytes(5 * C))
          this.destroy(Object.assign(new Error('boom'), { code: 'EBOOM' }))
        }
      })
      await rejects(pipeline(source, store.createWriteStream('new')), 'EBOOM')
      expect(await store.exists('new')).to.equal(false)
      await store.close()
      await assertNoStrayChunks(t.dir)
    })

    it('throws EINVAL for a bad key or options at once', () => {
      const store = t.open()
      for (const key of ['', null, 1]) throws(() => store.createWriteStream(key), 'EINVAL')
      for (const options of [null, 'x', { sha256: 'abc' }, { sha256: 5 }, { sha: 'x' }]) throws(() => store.createWriteStream('k', options), 'EINVAL')
    })

    it('with an expected sha256, commits matching content and refuses any other', async () => {
      const store = t.open({ chunkSize: C })
      const data = bytes(5 * C + 3)
      await pipeline(Readable.from([data]), store.createWriteStream('ok', { sha256: sha256(data).toUpperCase() }))
      expect((await store.readFile('ok')).equals(data)).to.equal(true)
      await store.writeFile('kept', 'previous')
      const err = await rejects(pipeline(Readable.from([bytes(5 * C + 3, 'other')]), store.createWriteStream('kept', { sha256: sha256(data) })), 'EINTEGRITY')
      expect(err.expected).to.equal(sha256(data))
      expect((await store.readFile('kept')).toString()).to.equal('previous')
      await store.close()
      await assertNoStrayChunks(t.dir)
    })
  })

  describe('createReadStream', () => {
    it('streams a whole file', async () => {
      const store = t.open({ chunkSize: C })
      const data = bytes(9 * C + 1)
      await store.writeFile('f', data)
      expect((await readAll(store.createReadStream('f'))).equals(data)).to.equal(true)
    })

    it('reads inclusive byte ranges like fs, within and across chunks', async () => {
      const store = t.open({ chunkSize: C })
      const data = bytes(5 * C + 10)
      await store.writeFile('f', data)
      const ranges = [[0, 0], [0, C - 1], [C - 1, C], [C, 2 * C - 1], [100, 3 * C + 5], [5 * C, 5 * C + 9], [5 * C + 9, 5 * C + 9], [7, undefined], [undefined, 10], [0, 10 * C]]
      for (const [start, end] of ranges) {
        const back = await readAll(store.createReadStream('f', { start, end }))
        const expected = data.subarray(start || 0, end === undefined ? undefined : end + 1)
        expect(back.equals(expected), `${start}-${end}`).to.equal(true)
      }
      expect((await readAll(store.createReadStream('f', { start: data.length }))).length).to.equal(0)
    })

    it('starts at the chunk holding `start` instead of chunk 0', async () => {
      const store = t.open({ chunkSize: C })
      const data = bytes(4 * C)
      await store.writeFile('f', data)
      await store.close()
      await damageChunk(t.dir, 0) // a read that touched chunk 0 would fail
      const again = t.open()
      const back = await readAll(again.createReadStream('f', { start: C + 3, end: 3 * C }))
      expect(back.equals(data.subarray(C + 3, 3 * C + 1))).to.equal(true)
      await rejects(readAll(again.createReadStream('f')), 'EINTEGRITY')
    })

    it('a range read after an overwrite, an unlink or a rewrite sees it, however often the same range was read before', async () => {
      const store = t.open({ chunkSize: C })
      const first = bytes(5 * C)
      await store.writeFile('again', first)
      const range = () => readAll(store.createReadStream('again', { start: C, end: 3 * C - 1 }))
      for (let i = 0; i < 3; i++) expect((await range()).equals(first.subarray(C, 3 * C))).to.equal(true)
      const second = Buffer.from(first).fill(7, C, 2 * C)
      await store.writeFile('again', second)
      expect((await range()).equals(second.subarray(C, 3 * C))).to.equal(true)
      await store.unlink('again')
      await rejects(range(), 'ENOENT')
      await rejects(readAll(store.createReadStream('again', { start: 0, end: 0 })), 'ENOENT')
      await store.writeFile('again', bytes(C / 2))
      await rejects(range(), 'EINVAL') // starts past the end of the new, shorter file
      expect((await readAll(store.createReadStream('again', { start: 0, end: 9 }))).equals(bytes(C / 2).subarray(0, 10))).to.equal(true)
      // An empty file's read fetches no chunk that could turn out missing.
      await store.writeFile('empty', Buffer.alloc(0))
      for (let i = 0; i < 2; i++) expect(await readAll(store.createReadStream('empty'))).to.have.length(0)
      await store.unlink('empty')
      await rejects(readAll(store.createReadStream('empty')), 'ENOENT')
    })

    it('rejects reversed or invalid ranges with EINVAL, and a start past the end', async () => {
      const store = t.open()
      await store.writeFile('f', 'abc')
      for (const range of [{ start: 5, end: 4 }, { start: -1 }, { end: -2 }, { start: 1.5 }, { start: '1' }, { end: null }]) {
        throws(() => store.createReadStream('f', range), 'EINVAL')
      }
      throws(() => store.createReadStream('f', null), 'EINVAL')
      throws(() => store.createReadStream('f', { Start: 1 }), 'EINVAL')
      await rejects(readAll(store.createReadStream('f', { start: 4 })), 'EINVAL')
    })

    it('emits ENOENT for a missing key instead of ending empty', async () => {
      const store = t.open()
      await rejects(readAll(store.createReadStream('nope')), 'ENOENT')
      await store.writeFile('x', 'y')
      await rejects(readAll(store.createReadStream('nope')), 'ENOENT')
    })

    it('destroying a read stream only stops reading', async () => {
      const store = t.open({ chunkSize: C })
      const data = bytes(50 * C)
      await store.writeFile('f', data)
      const rs = store.createReadStream('f')
      await new Promise((resolve) => rs.once('data', resolve))
      rs.destroy()
      await new Promise((resolve) => rs.once('close', resolve))
      expect((await store.readFile('f')).equals(data)).to.equal(true)
      await store.writeFile('f', 'next') // the shard was released: writes go on
      expect((await store.readFile('f')).toString()).to.equal('next')
    })

    it('pipes into a slow consumer with backpressure', async () => {
      const store = t.open({ chunkSize: C })
      const data = bytes(30 * C)
      await store.writeFile('f', data)
      const received = []
      await pipeline(store.createReadStream('f'), new Writable({
        highWaterMark: 1,
        write (chunk, enc, cb) {
          received.push(chunk)
          setImmediate(cb)
        }
      }))
      expect(Buffer.concat(received).equals(data)).to.equal(true)
    })

    // Read streams buffer nothing ahead (read-ahead is the reader's, within its share):
    // Node then reads a constructed stream only when it flows, unless kfs asks.
    it('is read whole by async iteration, and a paused stream buffers no chunk', async () => {
      const store = t.open({ chunkSize: C })
      const data = bytes(10 * C)
      await store.writeFile('f', data)
      const parts = []
      for await (const part of store.createReadStream('f')) parts.push(part)
      expect(Buffer.concat(parts).equals(data)).to.equal(true)
      const stream = store.createReadStream('f')
      await new Promise((resolve) => stream.once('data', () => { stream.pause(); resolve() }))
      await new Promise((resolve) => setTimeout(resolve, 50))
      expect(stream.readableLength).to.equal(0)
      stream.destroy()
    })
  })
})

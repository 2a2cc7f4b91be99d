'use strict'

const { metricsText, METRICS_CONTENT_TYPE } = require('../..')
const { println, write } = require('./output')
const { describeError } = require('./text')

// kfs metrics: the store's metrics (store.metrics()) in Prometheus's text format, or as
// JSON. With --listen, the figures of whichever process holds the store, served over TCP
// for Prometheus, which cannot scrape a Unix socket: the store is opened with hold: false
// (metrics.storeOptions), so this process never holds it and a node may start, stop and
// start again beside it.
async function metrics (store, io, { listen }) {
  if (listen) return serve(store, io, listen)
  const figures = await store.metrics()
  await write(io.stdout, io.json ? JSON.stringify(figures) + '\n' : metricsText(figures))
  return 0
}

metrics.storeOptions = ({ listen }) => (listen ? { hold: false } : {})

// Runs until the process is ended by a signal (bin/kfs.js). A missing store fails at once;
// a store no process holds is served as 503 until one does.
async function serve (store, io, { host, port }) {
  await store.metrics().catch((err) => {
    if (err.code !== 'ENOTCONN') throw err
  })
  const http = require('node:http')
  // A scrape that fails past its answer's start (its client gone) ends that answer only.
  const server = http.createServer((req, res) => answer(store, req, res).catch(() => res.destroy()))
  await new Promise((resolve, reject) => {
    server.once('error', reject)
    server.listen(port, host, resolve)
  })
  const address = server.address()
  const shown = address.family === 'IPv6' ? `[${address.address}]` : address.address
  const url = `http://${shown}:${address.port}/metrics`
  await println(io.stderr, `kfs: serving the metrics of ${store.location} on ${url}`)
  return new Promise(() => {})
}

// GET (or HEAD) /metrics: the holder's figures; 503 while no process holds the store.
async function answer (store, req, res) {
  const text = (status, body, headers = {}) => {
    res.writeHead(status, { 'content-type': status === 200 ? METRICS_CONTENT_TYPE : 'text/plain; charset=utf-8', 'content-length': Buffer.byteLength(body), ...headers })
    res.end(req.method === 'HEAD' ? undefined : body)
  }
  if (req.url.split('?')[0] !== '/metrics') return text(404, 'not found: kfs serves /metrics only\n')
  if (req.method !== 'GET' && req.method !== 'HEAD') return text(405, `${req.method} is not served: GET /metrics\n`, { allow: 'GET, HEAD' })
  try {
    text(200, metricsText(await store.metrics()))
  } catch (err) {
    text(err.code === 'ENOTCONN' ? 503 : 500, `${describeError(err)}\n`)
  }
}

module.exports = { metrics }

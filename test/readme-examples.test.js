'use strict'

// Runs every ```js code block of README.md as written, the way a user would: saved as
// app.js in a fresh app directory whose node_modules/kfs-store links to this checkout, then
// `node app.js` there (so relative store paths land in that directory). A block passes
// when it exits with 0 and writes nothing to stderr.
//
// A block that is not a program on purpose (the shape of an object, a fragment) is
// marked by the HTML comment `<!-- not runnable -->` on the line before its fence. The
// comment does not show on the rendered page. Every other block fenced as `js` or
// `javascript` runs. A block with `import` or `export` statements is an ES module,
// so it is saved as app.mjs.

const { expect } = require('chai')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { execFile } = require('node:child_process')
const { scaled } = require('./helpers')

const root = path.join(__dirname, '..')
const NOT_RUNNABLE = '<!-- not runnable -->'
const TIMEOUT = scaled(20000) // for each example's process

// The README's fenced code blocks whose info string names JavaScript, with the line
// their fence opens on and whether the marker precedes them.
function jsBlocks (markdown) {
  const lines = markdown.split('\n')
  const blocks = []
  for (let i = 0; i < lines.length; i++) {
    const open = /^(\s*)(`{3,}|~{3,})\s*([^\s`]*)/.exec(lines[i])
    if (!open) continue
    const [, indent, fence, lang] = open
    const close = new RegExp(`^\\s*\\${fence[0]}{${fence.length},}\\s*$`)
    const body = []
    let j = i + 1
    while (j < lines.length && !close.test(lines[j])) {
      body.push(lines[j].startsWith(indent) ? lines[j].slice(indent.length) : lines[j])
      j++
    }
    if (/^(js|javascript)$/i.test(lang)) {
      let before = i - 1
      while (before >= 0 && lines[before].trim() === '') before--
      blocks.push({ line: i + 1, code: body.join('\n') + '\n', runnable: before < 0 || lines[before].trim() !== NOT_RUNNABLE })
    }
    i = j // skip the block's body: a fence inside it is content
  }
  return blocks
}

function isModule (code) {
  return /^\s*(import\s[^(]|import\s*\{|export\s)/m.test(code)
}

function node (args, dir) {
  return new Promise((resolve) => {
    const env = { ...process.env, HOME: dir } // the default store (~/.kfs) stays in the app
    delete env.KFS_DB
    execFile(process.execPath, args, { cwd: dir, env, timeout: TIMEOUT }, (err, stdout, stderr) => {
      resolve({ code: err ? (err.code ?? err.signal) : 0, stdout, stderr })
    })
  })
}

describe('README examples', () => {
  const readme = fs.readFileSync(path.join(root, 'README.md'), 'utf8')
  const blocks = jsBlocks(readme)
  const runnable = blocks.filter((b) => b.runnable)
  let ran = 0
  const printed = new Map() // block -> its stdout

  it('finds js blocks, and skips only those marked not runnable', () => {
    const sample = [
      'text', '```js', 'run(1)', '```',
      '<!-- not runnable -->', '', '```js', '{ shape }', '```',
      '```sh', 'npm test', '```',
      '````md', '```js', 'inside()', '```', '````',
      '```javascript', 'run(2)', '```'
    ].join('\n')
    expect(jsBlocks(sample)).to.deep.equal([
      { line: 2, code: 'run(1)\n', runnable: true },
      { line: 7, code: '{ shape }\n', runnable: false },
      { line: 18, code: 'run(2)\n', runnable: true }
    ])
    expect(runnable.length, 'at least one README block must be runnable').to.be.above(0)
  })

  for (const block of runnable) {
    it(`README.md:${block.line} runs as written`, async function () {
      this.timeout(TIMEOUT + scaled(10000))
      const dir = await fs.promises.mkdtemp(path.join(os.tmpdir(), 'kfs-readme-'))
      try {
        await fs.promises.mkdir(path.join(dir, 'node_modules'))
        await fs.promises.symlink(root, path.join(dir, 'node_modules', 'kfs-store'), 'dir')
        const file = isModule(block.code) ? 'app.mjs' : 'app.js'
        await fs.promises.writeFile(path.join(dir, file), block.code)
        const result = await node([file], dir)
        expect(result.stderr, `stderr of the block at README.md:${block.line}`).to.equal('')
        expect(result.code, `exit code of the block at README.md:${block.line}\n${block.code}`).to.equal(0)
        // What it prints reads as a reader expects: whole lines, no value left out.
        if (result.stdout !== '') expect(result.stdout, `stdout of the block at README.md:${block.line}`).to.match(/\n$/)
        expect(result.stdout, `stdout of the block at README.md:${block.line}`).not.to.match(/\bundefined\b/)
        printed.set(block, result.stdout)
        ran++
      } finally {
        await fs.promises.rm(dir, { recursive: true, force: true })
      }
    })
  }

  it('require(\'kfs-store\') and import work inside the checkout too (self-reference)', async () => {
    // package.json "exports" is what lets a module of the package itself name it.
    const cjs = await node(['-p', "require.resolve('kfs-store')"], path.join(root, 'test'))
    expect(cjs).to.deep.equal({ code: 0, stdout: `${path.join(root, 'index.js')}\n`, stderr: '' })
    const esm = await node(['--input-type=module', '-e', "import kfs, { Store, errors } from 'kfs-store'; console.log(typeof kfs, kfs('x') instanceof Store, typeof errors.isNotFound)"], root)
    expect(esm).to.deep.equal({ code: 0, stdout: 'function true function\n', stderr: '' })
  })

  it('the quick start prints what it read, then every file it stored, by name or by key', function () {
    const quick = runnable.find((b) => b.code.includes('store.list()'))
    expect(quick, 'a README block that lists the store').to.not.equal(undefined)
    if (!printed.has(quick)) this.skip() // its own test failed
    const [read, range, ...listed] = printed.get(quick).split('\n').slice(0, -1)
    expect([read, range]).to.deep.equal(['hello', 'large file'])
    const key = require('node:crypto').hash('sha256', 'some content')
    expect(listed.sort()).to.deep.equal([`${key} 12`, 'big 12', 'notes.txt 5'])
  })

  it('ran at least one block', () => {
    expect(ran).to.be.above(0)
    expect(ran).to.equal(runnable.length)
  })
})

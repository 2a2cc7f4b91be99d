'use strict'

const { expect } = require('chai')
const fs = require('node:fs')
const path = require('node:path')
const { execFile } = require('node:child_process')
const kfs = require('..')
const { scaled } = require('./helpers')

const readme = fs.readFileSync(path.join(__dirname, '..', 'README.md'), 'utf8')
// The reference: README.md is the user's overview, doc/api.md documents everything.
const api = fs.readFileSync(path.join(__dirname, '..', 'doc', 'api.md'), 'utf8')
const libDir = path.join(__dirname, '..', 'lib')

// The .js files under dir, recursively, except in the subdirectories named in skip.
function libFiles (dir, skip = []) {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name)
    if (entry.isDirectory()) return skip.includes(entry.name) ? [] : libFiles(full)
    return entry.name.endsWith('.js') ? [full] : []
  })
}

// Source without its comments, roughly: block comments, and line comments that start
// a line or follow a space (so `//` inside a URL string stays).
function stripComments (source) {
  return source.replace(/\/\*[\s\S]*?\*\//g, '').replace(/(^|\s)\/\/.*$/gm, '$1')
}

describe('README and doc/api.md', () => {
  it('README lists every method of the store in its table; doc/api.md documents every method and property', () => {
    const members = Object.getOwnPropertyNames(kfs.Store.prototype).filter((m) => m !== 'constructor')
    const methods = members.filter((m) => typeof Object.getOwnPropertyDescriptor(kfs.Store.prototype, m).value === 'function')
    expect(methods.length).to.be.above(10)
    for (const method of methods) expect(readme, method).to.match(new RegExp(`^\\| \`store\\.${method}\\(`, 'm'))
    for (const member of members) expect(api, member).to.contain(`store.${member}`)
  })

  it('doc/api.md documents every option', () => {
    const { DEFAULTS } = require('../lib/api/options')
    for (const option of [...Object.keys(DEFAULTS), 'referenceId']) expect(api, option).to.contain(`\`${option}\``)
  })

  it('doc/api.md lists every error code the library raises', () => {
    const codes = new Set()
    // Every code-shaped word in the library's code, outside comments: however a code is
    // set (a quoted or template string, `code: ...`, `code = ...`, a table of codes), it
    // is written out somewhere. Two letters after the E, or EIO would slip through. The
    // command line (lib/cli/) is documented in doc/cli.md instead.
    for (const file of libFiles(libDir, ['cli'])) {
      for (const m of stripComments(fs.readFileSync(file, 'utf8')).matchAll(/\bE[A-Z]{2,}\b/g)) codes.add(m[0])
    }
    // Codes LevelDB reports as strerror text, mapped in lib/leveldb/classify.js: they pass
    // through to callers with the code, so each needs documenting too.
    const leveldb = fs.readFileSync(path.join(libDir, 'leveldb', 'classify.js'), 'utf8')
    const map = /const SYSTEM_ERRORS = \{([^}]*)\}/.exec(leveldb)
    expect(map, 'SYSTEM_ERRORS in lib/leveldb/classify.js: update this test if it moved').to.not.equal(null)
    const system = [...map[1].matchAll(/:\s*['"`](E[A-Z]+)['"`]/g)].map((m) => m[1])
    expect(system).to.include.members(['EMFILE', 'EACCES', 'EIO'])
    for (const code of system) codes.add(code)
    expect(codes).to.include.keys(['EINVAL', 'ENOENT', 'EIO', 'ECLOSED'])
    for (const code of codes) expect(api, code).to.match(new RegExp(`^\\| [^|]*\`${code}\`[^|]*\\|`, 'm'))
  })

  it('doc/api.md mentions every export of index.js', () => {
    const names = Object.keys(kfs)
    expect(names).to.include.members(['kfs', 'Store', 'errors'])
    for (const name of names) {
      // kfs.name, or a destructuring or named import of it from 'kfs-store'.
      const used = new RegExp(`kfs\\.${name}\\b|\\{[^}]*\\b${name}\\b[^}]*\\}\\s*=\\s*require\\('kfs-store'\\)|import [^;\\n]*\\b${name}\\b[^;\\n]* from 'kfs-store'`)
      expect(api, name).to.match(used)
    }
  })

  it('declares every public property and method of the store in index.d.ts', () => {
    const types = fs.readFileSync(path.join(__dirname, '..', 'index.d.ts'), 'utf8')
    const store = kfs(path.join(__dirname, 'never-opened')) // touches no disk until used
    const members = [...Object.getOwnPropertyNames(kfs.Store.prototype).filter((m) => m !== 'constructor'), ...Object.keys(store)]
    expect(members).to.include.members(['open', 'close', 'location', 'shardCount'])
    for (const member of members) expect(types, member).to.match(new RegExp(`^\\s*(readonly\\s+)?${member}\\s*[(:]`, 'm'))
    // And every predicate of kfs.errors.
    const predicates = Object.keys(kfs.errors).filter((name) => /^is[A-Z]/.test(name))
    expect(predicates).to.include('isNotFound')
    for (const name of predicates) expect(types, name).to.match(new RegExp(`function ${name} \\(`))
  })

  it('has a Quick start with npm install, kfs put and kfs get, then npm test', () => {
    expect(readme).to.match(/## Quick start[\s\S]*npm install[\s\S]*npx kfs put[\s\S]*npx kfs get[\s\S]*npm test/)
  })

  it('says how to install kfs in an app, and that `npm install kfs` is another package', () => {
    const install = /\n## Install\n([\s\S]*?)\n## /.exec(readme)
    expect(install, 'an Install section').to.not.equal(null)
    expect(install[1]).to.match(/npm install \/path\/to\/kfs/)
    expect(install[1]).to.contain(`package name is **\`${require('../package.json').name}\`**`)
    expect(install[1]).to.match(/npm install git\+https:\/\//)
    expect(install[1]).to.match(/`npm install kfs`[^.]*unrelated/)
  })

  it('documents every command of the command line, here and in doc/cli.md', () => {
    const cliDoc = fs.readFileSync(path.join(__dirname, '..', 'doc', 'cli.md'), 'utf8')
    const program = require('../lib/cli/program').buildProgram(() => {}, {})
    for (const command of program.commands) {
      expect(readme, command.name()).to.contain(`kfs ${command.name()}`)
      expect(cliDoc, command.name()).to.contain(`kfs ${command.name()}`)
      for (const option of command.options) expect(cliDoc, option.long).to.contain(option.long)
    }
  })
})

describe('npm package', () => {
  it('ships the code, the declarations and the docs, not the benchmark data', async function () {
    this.timeout(scaled(60000))
    const root = path.join(__dirname, '..')
    const out = await new Promise((resolve, reject) => {
      // stderr holds npm's notices; the listing is the JSON on stdout.
      execFile('npm', ['pack', '--dry-run', '--json'], { cwd: root, maxBuffer: 16 * 1024 * 1024 }, (err, stdout) => (err ? reject(err) : resolve(stdout)))
    })
    const files = JSON.parse(out)[0].files.map((f) => f.path)
    const pkg = require('../package.json')
    // Everything package.json points at: exports, types, bin.
    const wanted = ['index.js', 'index.d.ts', 'package.json', 'README.md', 'LICENSE', pkg.types, ...Object.values(pkg.bin),
      ...Object.values(pkg.exports).flatMap((target) => (typeof target === 'string' ? [target] : Object.values(target)))]
    for (const file of wanted) expect(files, file).to.include(path.normalize(file))
    expect(files.filter((f) => f.startsWith('lib/')).length).to.be.above(10)
    expect(files).to.include.members(fs.readdirSync(path.join(root, 'doc')).filter((f) => f.endsWith('.md')).map((f) => `doc/${f}`))
    expect(files.filter((f) => f.startsWith('doc/performance/') || f.startsWith('test/') || f.startsWith('perf/'))).to.deep.equal([])
  })
})

'use strict'

const { expect } = require('chai')
const fs = require('node:fs')
const path = require('node:path')
const kfs = require('..')

const readme = fs.readFileSync(path.join(__dirname, '..', 'README.md'), 'utf8')
const libDir = path.join(__dirname, '..', 'lib')

describe('README', () => {
  it('documents every public method of the store', () => {
    const methods = Object.getOwnPropertyNames(kfs.Store.prototype).filter((m) => m !== 'constructor')
    expect(methods.length).to.be.above(10)
    for (const method of methods) expect(readme, method).to.contain(`store.${method}`)
  })

  it('documents every option', () => {
    const { DEFAULTS } = require('../lib/options')
    for (const option of [...Object.keys(DEFAULTS), 'referenceId']) expect(readme, option).to.contain(`\`${option}\``)
  })

  it('lists every error code the library raises', () => {
    const codes = new Set()
    // The library's own modules; the command line is documented in doc/cli.md.
    for (const file of fs.readdirSync(libDir).filter((f) => f.endsWith('.js'))) {
      for (const m of fs.readFileSync(path.join(libDir, file), 'utf8').matchAll(/'(E[A-Z]{3,})'/g)) codes.add(m[1])
    }
    expect(codes.size).to.be.above(5)
    for (const code of codes) expect(readme, code).to.match(new RegExp(`^\\| [^|]*\`${code}\`[^|]*\\|`, 'm'))
  })

  it('has a Quick start with npm install, npm test, kfs put and kfs get', () => {
    expect(readme).to.match(/## Quick start[\s\S]*npm install[\s\S]*npm test[\s\S]*npx kfs put[\s\S]*npx kfs get/)
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

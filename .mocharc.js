'use strict'

module.exports = {
  spec: ['test/**/*.test.js'],
  timeout: 30000,
  reporter: 'dot'
}

'use strict'

// `npm test`: mocha --config test/mocharc.default.js (see test/mocharc.js).
module.exports = require('./mocharc').config('.')

'use strict'

// `npm run test:all`: mocha --config test/mocharc.all.js (see test/mocharc.js).
module.exports = require('./mocharc').config('.', 'system')

'use strict'

// `npm run test:system`: mocha --config test/mocharc.system.js (see test/mocharc.js).
module.exports = require('./mocharc').config('system')

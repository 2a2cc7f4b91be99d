'use strict'

// Power cuts: the second part of the crash-state workloads (power-cut-suite.js; the
// first, and the models' own tests, are in crash-states.test.js).
const { powerCutSuite } = require('./power-cut-suite')

powerCutSuite(1)

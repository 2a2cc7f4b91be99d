'use strict'

// Defaults for every mocha run, `npx mocha test/FILE` too, which runs just FILE: no
// file list here (mocha would add it to the files named on the command line). The
// runs of `npm test` and `npm run test:system`, with their lists, are test/mocharc.*.js.
const { scaled } = require('./test/helpers')

module.exports = {
  timeout: scaled(60000), // a hang, not a slow machine; KFS_TEST_SLOWDOWN scales it (test/helpers.js)
  reporter: 'spec'
}

// The same declarations seen from an ES module: the default import is the kfs
// function, and the named exports Node derives from index.js are declared too.

import kfs, { Store, errors } from 'kfs-store'

const store: Store = kfs('./store', { create: false })
const isStore: boolean = store instanceof Store
const missing: boolean = errors.isNotFound(new Error('x'))
void [isStore, missing]

// Jest's transform for .ts files: Node's own type stripping, the way Node runs
// src/ itself. It only erases types (whitespace in their place, so line and
// column numbers stay those of the source and no source map is needed); it
// checks nothing. The type check is `npm run typecheck`, which `make test` runs
// before jest; tsconfig's erasableSyntaxOnly and verbatimModuleSyntax make sure
// every file is one that erasing types alone turns into JavaScript.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { stripTypeScriptTypes } from 'node:module';

// The output depends on the source, on Node (its stripper) and on this file.
const salt = `${process.version}\0${readFileSync(import.meta.filename, 'utf8')}`;

/** @type {import('@jest/transform').SyncTransformer} */
export default {
  canInstrument: false,
  getCacheKey(source, path) {
    return createHash('sha256').update(salt).update('\0').update(path).update('\0').update(source).digest('hex');
  },
  process(source) {
    return { code: stripTypeScriptTypes(source, { mode: 'strip' }) };
  },
};

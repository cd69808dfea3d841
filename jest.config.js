// Seven tiers, one jest project each. Services a tier needs (Temporal dev
// server, prebuilt workflow bundle, Kubernetes test bed, Cluster API's
// managers with the extension as `make dev` runs it) are started once per run
// by test/support/global-setup.ts, only for the tiers selected. TypeScript is
// run with its types stripped by Node (test/support/strip-types.js), unchecked:
// `npm run typecheck` is the one type check, and `make test` runs it first.
const stripTypes = '<rootDir>/test/support/strip-types.js';
// Its default is /tmp/jest_<uid>: a run leaves nothing in /tmp. Each project
// needs it: a project's haste map and transforms ignore the top-level one.
const cacheDirectory = '<rootDir>/node_modules/.cache/jest';

/** @param {string} name */
function project(name) {
  return {
    displayName: name,
    testEnvironment: 'node',
    roots: [`<rootDir>/test/${name}`],
    testMatch: ['**/*.test.ts'],
    extensionsToTreatAsEsm: ['.ts'],
    transform: { '^.+\\.ts$': stripTypes },
    setupFilesAfterEnv: ['<rootDir>/test/support/jest-timeout.ts'],
    cacheDirectory,
  };
}

/** @type {import('jest').Config} */
export default {
  projects: [
    project('unit'),
    project('workflow'),
    project('integration'),
    project('e2e'),
    project('capi'),
    project('production'),
    project('nodes'),
  ],
  globalSetup: '<rootDir>/test/support/global-setup.ts',
  globalTeardown: '<rootDir>/test/support/global-teardown.ts',
  maxWorkers: 2,
  cacheDirectory,
};

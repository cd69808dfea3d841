// Four tiers, one jest project each. Services a tier needs (Temporal dev
// server, prebuilt workflow bundle, Kubernetes test bed) are started once per
// run by test/support/global-setup.ts, only for the tiers selected.
const tsJest = ['ts-jest', { useESM: true, tsconfig: 'tsconfig.json' }];

/** @param {string} name */
function project(name) {
  return {
    displayName: name,
    testEnvironment: 'node',
    roots: [`<rootDir>/test/${name}`],
    testMatch: ['**/*.test.ts'],
    extensionsToTreatAsEsm: ['.ts'],
    transform: { '^.+\\.ts$': tsJest },
    setupFilesAfterEnv: ['<rootDir>/test/support/jest-timeout.ts'],
  };
}

/** @type {import('jest').Config} */
export default {
  projects: [
    project('unit', 10_000),
    project('workflow', 60_000),
    project('integration', 180_000),
    project('e2e', 90_000),
  ],
  globalSetup: '<rootDir>/test/support/global-setup.ts',
  globalTeardown: '<rootDir>/test/support/global-teardown.ts',
  maxWorkers: 2,
};

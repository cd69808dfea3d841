// What the global setup publishes to test files, through environment
// variables (jest workers inherit the parent's environment).
export interface TestServicesEnv {
  TEMPORAL_ADDRESS: string;
  TEMPORAL_NAMESPACE: string;
  TEST_WORKFLOW_BUNDLE: string;
}

export function requireEnv(name: keyof TestServicesEnv | string): string {
  const value = process.env[name];
  if (!value)
    throw new Error(`${name} is not set: run the tests through \`make test\` (global setup starts the services)`);
  return value;
}

/** Tiers that need a Temporal dev server. */
export const temporalTiers = ['workflow', 'e2e', 'integration', 'nodes'];

// `createActivities(deps)` returns every activity function the worker
// registers; dependencies (Kubernetes clients, config) come in from outside so
// tests can pass their own.
import { createProbeActivities } from './probe.ts';

// eslint-disable-next-line @typescript-eslint/no-empty-object-type -- grows with the Kubernetes adapters
export interface ActivityDeps {}

export function createActivities(_deps: ActivityDeps = {}) {
  return {
    ...createProbeActivities(),
  };
}

export type Activities = ReturnType<typeof createActivities>;

// The production tier's Temporal: the server's services on PostgreSQL that the
// global setup started (scripts/temporal-production.sh), and the tier's own test
// bed. Importing this module first points the usual helpers (testClient,
// temporalCli, workers, fixtures) at them instead of the dev server and the
// integration tier's test bed; jest gives each test file its own process.env.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { TemporalServiceName } from '../../src/local/temporal-production.ts';
import { requireEnv } from './services.ts';

process.env.TEMPORAL_ADDRESS = requireEnv('PRODUCTION_TEMPORAL_ADDRESS');
process.env.TEMPORAL_NAMESPACE = requireEnv('PRODUCTION_TEMPORAL_NAMESPACE');
// The tier's own test bed (test/support/fixtures.ts reads TESTBED_STATE).
process.env.TESTBED_STATE = requireEnv('PRODUCTION_TESTBED_STATE');

export const productionState = requireEnv('PRODUCTION_TEMPORAL_STATE');

/** The state file the script keeps: pids change when a service is restarted. */
export function productionPids(): Record<TemporalServiceName | 'postgres', number> {
  const state = JSON.parse(readFileSync(join(productionState, 'temporal.json'), 'utf8')) as {
    pids: Record<TemporalServiceName | 'postgres', number>;
  };
  return state.pids;
}

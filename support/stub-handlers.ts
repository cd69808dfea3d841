// Hook implementations that stand in for the real ones where a test or a bench serves hooks
// without the workflows behind them: nothing in the extension uses them.
import { HookFailure } from '../src/api/hooks/errors.ts';
import type { InPlaceHandlers } from '../src/api/handlers/in-place/routes.ts';
import type { LifecycleHandlers } from '../src/api/handlers/lifecycle/routes.ts';

/** Until a workflow backs them: record nothing, hold nothing back. */
export const nonBlockingLifecycleHandlers: LifecycleHandlers = {
  BeforeClusterCreate: async () => ({ status: 'Success', retryAfterSeconds: 0 }),
  AfterControlPlaneInitialized: async () => ({ status: 'Success' }),
  BeforeClusterUpgrade: async () => ({ status: 'Success', retryAfterSeconds: 0 }),
  BeforeControlPlaneUpgrade: async () => ({ status: 'Success', retryAfterSeconds: 0 }),
  AfterControlPlaneUpgrade: async () => ({ status: 'Success', retryAfterSeconds: 0 }),
  BeforeWorkersUpgrade: async () => ({ status: 'Success', retryAfterSeconds: 0 }),
  AfterWorkersUpgrade: async () => ({ status: 'Success', retryAfterSeconds: 0 }),
  AfterClusterUpgrade: async () => ({ status: 'Success', retryAfterSeconds: 0 }),
  BeforeClusterDelete: async () => ({ status: 'Success', retryAfterSeconds: 0 }),
};

/**
 * In-place updates switched off: declare no change in-place (CAPI then rolls
 * machines out), and refuse UpdateMachine, which CAPI only sends after a
 * CanUpdate* answer carried patches.
 */
export const noInPlaceHandlers: InPlaceHandlers = {
  CanUpdateMachine: async () => ({ status: 'Success' }),
  CanUpdateMachineSet: async () => ({ status: 'Success' }),
  UpdateMachine: async () => {
    throw new HookFailure('in-place updates are not enabled in this extension; no machine update was started');
  },
};

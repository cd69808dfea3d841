// A real worker for the integration tier with nothing stubbed: the real activities,
// acting on the test bed's management cluster as the worker's ServiceAccount.
import { createActivities } from '../../src/activities/index.ts';
import { managementKubeConfig } from '../../src/platform/kube/clients.ts';
import { testbed } from '../../support/testbed-fixtures.ts';
import { startTestWorker } from './temporal.ts';

export type TestbedWorker = Awaited<ReturnType<typeof startTestWorker>>;

/** Polls `taskQueue` in the background until `stop()`. */
export function startTestbedWorker(taskQueue: string): Promise<TestbedWorker> {
  return startTestWorker({
    taskQueue,
    activities: createActivities({ management: managementKubeConfig(testbed().workerKubeconfig) }),
  });
}

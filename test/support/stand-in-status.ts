// A stand-in for whoever serves NodeUpgradeRequests (a node agent, a node upgrader): it lists the
// requests of one namespace every `pauseMs` and writes the status `statusFor` says (with the
// request's generation as observedGeneration); undefined leaves a request alone.
import type { CustomObjectsApi } from '@kubernetes/client-node';
import {
  NODE_UPGRADE_GROUP,
  NODE_UPGRADE_PLURAL,
  NODE_UPGRADE_VERSION,
  type NodeUpgradeRequest,
  type NodeUpgradeRequestStatus,
} from '../../src/activities/executors/node-upgrade-request-crd.ts';
import { mergePatch, sleep } from '../../support/testbed-fixtures.ts';

export function startStandInStatus(
  custom: CustomObjectsApi,
  namespace: string,
  statusFor: (req: NodeUpgradeRequest) => Omit<NodeUpgradeRequestStatus, 'observedGeneration'> | undefined,
  pauseMs = 200,
): { stop: () => Promise<void> } {
  const ref = { group: NODE_UPGRADE_GROUP, version: NODE_UPGRADE_VERSION, plural: NODE_UPGRADE_PLURAL, namespace };
  let running = true;
  const loop = (async () => {
    while (running) {
      try {
        const list = (await custom.listNamespacedCustomObject(ref)) as { items: NodeUpgradeRequest[] };
        for (const req of list.items) {
          const status = statusFor(req);
          if (!status) continue;
          const observedGeneration = req.metadata.generation ?? 0;
          await custom.patchNamespacedCustomObjectStatus(
            { ...ref, name: req.metadata.name, body: { status: { ...status, observedGeneration } } },
            mergePatch,
          );
        }
      } catch {
        // the CRD is not served yet, or a request was deleted under us
      }
      await sleep(pauseMs);
    }
  })();
  return {
    stop: async () => {
      running = false;
      await loop;
    },
  };
}

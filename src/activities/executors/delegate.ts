// The `delegate` node-upgrade executor: a NodeUpgradeRequest custom resource in
// the workload cluster that an agent on the node acts on and reports back in
// status; upgradeNode writes it (installing its CRD when missing), and the
// agent's verdict on the current generation is read by the caller. The request's
// lifecycle is shared with the `management` executor (node-upgrade-request.ts).
import { CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import { ApplicationFailure } from '@temporalio/common';
import { apiClient } from '../../platform/kube/clients.ts';
import { isConflict, isNotFound } from '../../platform/kube/errors.ts';
import { MANAGED_BY, MANAGED_BY_LABEL, nodeLabel, type NodeUpgradeExecution } from '../machine-update-common.ts';
import { filesSecretName, type ResolvedNodeUpgrade } from './bootstrap-files.ts';
import {
  NODE_UPGRADE_GROUP,
  NODE_UPGRADE_KIND,
  NODE_UPGRADE_PLURAL,
  NODE_UPGRADE_REQUEST_CRD,
  NODE_UPGRADE_VERSION,
} from './node-upgrade-request-crd.ts';
import { reportedFailure, requestExecution } from './node-upgrade-request.ts';

/** Asking again for a just-installed CRD to be served: 5 s at most (the activity heartbeats every 10 s). */
const CRD_SERVED_ATTEMPTS = 20;
const CRD_SERVED_PAUSE_MS = 250;

/** The node's NodeUpgradeRequest in the workload cluster (written, or its spec replaced) and the agent's verdict on that generation. */
export function delegateExecution(kc: KubeConfig, namespace: string, input: ResolvedNodeUpgrade): NodeUpgradeExecution {
  return requestExecution(
    {
      kc,
      namespace,
      server: 'node agent',
      missingHint: 'is an agent running there? (or use nodeUpgradeExecutor=job)',
      spec: {
        nodeName: input.nodeName,
        machineRef: { namespace: input.machine.namespace, name: input.machine.name },
        kubernetesVersion: input.version,
        // File contents (often secrets) go in a Secret owned by the request, never in its spec.
        ...(input.files.length > 0 ? { bootstrapFilesSecretRef: { name: filesSecretName(input.requestName) } } : {}),
      },
      metadata: () => Promise.resolve({ labels: { [MANAGED_BY_LABEL]: MANAGED_BY, ...nodeLabel(input.nodeName) } }),
      watchPath: `/apis/${NODE_UPGRADE_GROUP}/${NODE_UPGRADE_VERSION}/namespaces/${namespace}/${NODE_UPGRADE_PLURAL}`,
      specChange: 'patch',
      async crdMissing(create) {
        // The CRD is missing, or was just installed by a concurrent update and not yet served here.
        await ensureNodeUpgradeRequestCrd(kc);
        // A new CRD is served a few seconds after it is Established: ask again here, briefly,
        // rather than fail into the activity's retry backoff (2 s, 4 s …: the first machine
        // updates of a cluster lost ~6 s each to it in bench/machine-updates.ts).
        for (let attempt = 1; ; attempt++) {
          const created = await create();
          if (created) return created;
          if (attempt >= CRD_SERVED_ATTEMPTS)
            throw ApplicationFailure.retryable(
              `${NODE_UPGRADE_KIND} is not served yet in the workload cluster`,
              'CrdNotServed',
            );
          await new Promise((r) => setTimeout(r, CRD_SERVED_PAUSE_MS));
        }
      },
      failed: (status) => `node agent reported Failed: ${reportedFailure(status) ?? 'no message'}`,
    },
    input,
  );
}

/**
 * Installs the NodeUpgradeRequest CRD (a 409 means it is there) and waits until it is served.
 * Create first, not read first: one request either way, and the same verbs every time
 * (config/workload grants exactly get and create).
 */
export async function ensureNodeUpgradeRequestCrd(kc: KubeConfig): Promise<void> {
  const custom = apiClient(kc, CustomObjectsApi);
  const ref = { group: 'apiextensions.k8s.io', version: 'v1', plural: 'customresourcedefinitions' };
  const name = NODE_UPGRADE_REQUEST_CRD.metadata.name;
  const read = async (): Promise<CrdObject | undefined> => {
    try {
      return (await custom.getClusterCustomObject({ ...ref, name })) as CrdObject;
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  };
  const established = (crd: CrdObject | undefined) =>
    crd?.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True') ?? false;
  try {
    await custom.createClusterCustomObject({ ...ref, body: NODE_UPGRADE_REQUEST_CRD });
  } catch (err) {
    if (!isConflict(err)) throw err;
  }
  // Plain timers: this also runs from the async-completion watch, outside any activity.
  const pause = () => new Promise((r) => setTimeout(r, 500));
  for (let i = 0; i < 60; i++) {
    if (established(await read())) {
      // Established, yet the endpoint may need a moment longer to serve.
      await pause();
      return;
    }
    await pause();
  }
  throw ApplicationFailure.retryable(`CustomResourceDefinition ${name} not established after 30s`, 'CrdNotEstablished');
}

interface CrdObject {
  status?: { conditions?: { type: string; status: string }[] };
}

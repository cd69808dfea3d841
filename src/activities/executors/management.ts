// The `management` node-upgrade executor: the NodeUpgradeRequest goes into the
// management cluster, in the Machine's namespace and owned by the Machine, for
// the infrastructure's node upgrader (seed 003's "Node upgrader"), which reports
// in its status like a node agent (docs/node-upgrade-request.md, "In the
// management cluster"). The lifecycle is the delegate executor's
// (node-upgrade-request.ts); what differs: the client and namespace, the owner
// and labels, the Cluster / infrastructure machine / bootstrap config refs in
// the spec, and the CRD, which config/ installs (the worker has no CRD rights
// there, so a missing CRD fails the update without touching the node).
import { CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import { ApplicationFailure } from '@temporalio/common';
import { apiClient } from '../../platform/kube/clients.ts';
import {
  labelIfValid,
  MACHINE_UPDATE_FAILURES,
  MANAGED_BY,
  MANAGED_BY_LABEL,
  nodeLabel,
  type NodeUpgradeExecution,
} from '../machine-update-common.ts';
import { readMachine } from '../node-reads.ts';
import { filesSecretName, type ResolvedNodeUpgrade } from './bootstrap-files.ts';
import { NODE_UPGRADE_KIND } from './node-upgrade-request-crd.ts';
import { ALL_NAMESPACES_REQUESTS_PATH, reportedFailure, requestExecution } from './node-upgrade-request.ts';
import { CAPI_API_VERSION, CLUSTER_NAME_LABEL } from '../../platform/kube/capi-api.ts';

export const MACHINE_NAME_LABEL = 'upgrades.capi-orchestrator.io/machine-name';

/** The node's NodeUpgradeRequest in the management cluster and its upgrader's verdict on that generation. */
export function managementExecution(management: KubeConfig, input: ResolvedNodeUpgrade): NodeUpgradeExecution {
  const machine = input.machine;
  const refs = input.objectRefs ?? {};
  return requestExecution(
    {
      kc: management,
      // The Machine's namespace: its tenant's, where the upgrader finds the Machine and its objects.
      namespace: machine.namespace,
      server: 'node upgrader',
      missingHint: 'is the node upgrader of this infrastructure running? (or use nodeUpgradeExecutor=job)',
      spec: {
        nodeName: input.nodeName,
        machineRef: { namespace: machine.namespace, name: machine.name },
        kubernetesVersion: input.version,
        clusterName: input.cluster.name,
        ...(refs.infrastructureMachine ? { infrastructureMachineRef: refs.infrastructureMachine } : {}),
        ...(refs.bootstrapConfig ? { bootstrapConfigRef: refs.bootstrapConfig } : {}),
        ...(input.files.length > 0 ? { bootstrapFilesSecretRef: { name: filesSecretName(input.requestName) } } : {}),
      },
      async metadata() {
        // Owned by the Machine (not its controller): the request goes when the Machine does.
        const found = await readMachine(apiClient(management, CustomObjectsApi), machine);
        const uid = found?.metadata?.uid;
        if (!uid)
          throw ApplicationFailure.nonRetryable(
            `Machine ${machine.namespace}/${machine.name} was deleted`,
            MACHINE_UPDATE_FAILURES.machineDeleted,
          );
        return {
          labels: {
            [MANAGED_BY_LABEL]: MANAGED_BY,
            ...nodeLabel(input.nodeName),
            ...labelIfValid(CLUSTER_NAME_LABEL, input.cluster.name),
            ...labelIfValid(MACHINE_NAME_LABEL, machine.name),
          },
          ownerReferences: [
            {
              apiVersion: CAPI_API_VERSION,
              kind: 'Machine',
              name: machine.name,
              uid,
              controller: false,
              blockOwnerDeletion: false,
            },
          ],
        };
      },
      // One watch for the requests of every namespace (the worker may list and watch them cluster-wide).
      watchPath: ALL_NAMESPACES_REQUESTS_PATH,
      // Patching would be one more verb for a case the name (spec hash, attempt) rules out in practice.
      specChange: 'recreate',
      crdMissing: () =>
        Promise.reject(
          // Nothing reached the node: the update fails as "not taken", and the node is given back.
          ApplicationFailure.nonRetryable(
            `${NODE_UPGRADE_KIND} is not served in the management cluster: install its CRD (config/crd, part of config/default)`,
            MACHINE_UPDATE_FAILURES.nodeAgentMissing,
          ),
        ),
      failed: (status) => reportedFailure(status) ?? 'node upgrader reported Failed without a reason or message',
    },
    input,
  );
}

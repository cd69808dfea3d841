// `createActivities(deps)` returns every activity function the worker
// registers; dependencies (Kubernetes clients) come in from outside so tests
// can pass their own. Every activity fails with a stable message (failures.ts):
// activity failures reach CAPI conditions.
import type { KubeConfig } from '@kubernetes/client-node';
import { createAlertActivities } from './alerts.ts';
import { withStableFailures } from './failures.ts';
import { createFleetActivities } from './fleet.ts';
import { managementKubeConfig } from '../platform/kube/clients.ts';
import { createMachineUpdateActivities } from './machine-update.ts';
import type { JobExecutorConfig } from './executors/job.ts';
import type { NodeUpgradeWatch } from './node-upgrade-watch.ts';
import { createProbeActivities } from './probe.ts';
import { createReadinessActivities } from './readiness.ts';
import { createUpgradeActivities } from './upgrade.ts';
import type { WorkflowPort } from '../platform/temporal/workflows.ts';

export interface ActivityDeps {
  /** The management cluster; default: MANAGEMENT_KUBECONFIG, else the in-cluster service account. */
  management?: KubeConfig;
  /** The `job` node-upgrade executor's image, binary source and checksums; unset: its defaults (no checksums). */
  nodeUpgradeJob?: JobExecutorConfig;
  /** Webhook for phase-change notifications (CloudEvents); unset = none. */
  notificationWebhookUrl?: string;
  /** Waits on node upgrades outside activity slots; unset = upgradeNode polls in its slot. */
  upgradeWatch?: NodeUpgradeWatch;
  /** Where the management executor's node upgraders keep their Leases (the readiness check reads them). */
  nodeUpgraderNamespace?: string;
  /** The workflow service, for fleet rollouts following cluster upgrades; unset = they fail saying so. */
  temporal?: WorkflowPort;
}

export function createActivities(deps: ActivityDeps = {}) {
  const management = deps.management ?? managementKubeConfig();
  const upgrade = createUpgradeActivities({
    management,
    ...(deps.notificationWebhookUrl ? { notifications: { url: deps.notificationWebhookUrl } } : {}),
  });
  return withStableFailures({
    ...createProbeActivities(),
    ...upgrade,
    ...createAlertActivities(management),
    ...createReadinessActivities(
      management,
      deps.nodeUpgraderNamespace ? { nodeUpgraderNamespace: deps.nodeUpgraderNamespace } : {},
    ),
    ...createFleetActivities({
      management,
      checkClusterHealth: upgrade.checkClusterHealth,
      ...(deps.temporal ? { temporal: deps.temporal } : {}),
    }),
    ...createMachineUpdateActivities({
      management,
      ...(deps.nodeUpgradeJob ? { job: deps.nodeUpgradeJob } : {}),
      ...(deps.upgradeWatch ? { upgradeWatch: deps.upgradeWatch } : {}),
    }),
  });
}

export type Activities = ReturnType<typeof createActivities>;

// Activities of the machine update workflow: preflight against the Cluster API
// Machine, cordon / kubectl-style drain / uncordon of its node, the node upgrade
// through an executor (a NodeUpgradeRequest an agent on the node acts on, or a
// privileged Job pinned to the node), and the wait for the new kubelet. Every
// activity is idempotent; the long ones heartbeat, keep their start time in the
// heartbeat details (so a retried attempt keeps the original deadlines) and
// stop promptly when cancelled.
import {
  BatchV1Api,
  CoreV1Api,
  CustomObjectsApi,
  PatchStrategy,
  PolicyV1Api,
  setHeaderOptions,
  type KubeConfig,
  type V1Job,
  type V1Node,
  type V1Pod,
  type V1PodDisruptionBudget,
} from '@kubernetes/client-node';
import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import { filterPodsForDrain, summarizeDrain, type DrainFilterResult, type PdbBlock } from '../domain/drain.ts';
import { isConflict, isNotFound, isTooManyRequests, workloadKubeConfig } from './kube.ts';
import type {
  DrainOptions,
  DrainProgress,
  DrainResult,
  MachineRef,
  MachineUpdateActivities,
  NodeUpgradeInput,
  PreflightResult,
} from './machine-update-types.ts';
import { kubeletMatches, selectorMatches } from './upgrade.ts';

export interface MachineUpdateActivityDeps {
  /** The management cluster (Machines, `<cluster>-kubeconfig` Secrets). */
  management: KubeConfig;
  /** Workload-cluster namespace of NodeUpgradeRequests and upgrade Jobs; default `kube-system`. */
  workloadNamespace?: string;
  /** How often the node-upgrade waits poll; default 2 s. */
  pollIntervalMs?: number;
  /** The `job` executor. */
  job?: {
    /** Image with `nsenter` (the script runs in the host's namespaces); default {@link DEFAULT_JOB_IMAGE}. */
    image?: string;
    /** Shell script run on the host; default {@link DEFAULT_JOB_SCRIPT}. */
    script?: string;
    /** Job spec.backoffLimit; default 2. */
    backoffLimit?: number;
  };
}

/** Node annotation recording that this extension cordoned the node (set in the same patch as the cordon). */
export const CORDONED_BY_ANNOTATION = 'upgrades.capi-orchestrator.io/cordoned-by';
export const CORDONED_BY_US = 'machine-update';
/** Node annotation a failed update leaves, with the reason (for MachineHealthCheck/remediation and people). */
export const UPDATE_FAILED_ANNOTATION = 'upgrades.capi-orchestrator.io/update-failed';
export const UPDATE_FAILED_MAX_LENGTH = 1024;
/** Label on NodeUpgradeRequests and upgrade Jobs: the node they are for. */
export const NODE_NAME_LABEL = 'upgrades.capi-orchestrator.io/node-name';
export const MANAGED_BY_LABEL = 'app.kubernetes.io/managed-by';
export const MANAGED_BY = 'capi-upgrade-orchestrator';
export const DEFAULT_WORKLOAD_NAMESPACE = 'kube-system';

export const NODE_UPGRADE_GROUP = 'upgrades.capi-orchestrator.io';
export const NODE_UPGRADE_VERSION = 'v1alpha1';
export const NODE_UPGRADE_PLURAL = 'nodeupgraderequests';
export const NODE_UPGRADE_KIND = 'NodeUpgradeRequest';

/** Types of the ApplicationFailures raised here. */
export const MACHINE_UPDATE_FAILURES = {
  machineNotFound: 'MachineNotFound',
  machineHasNoNode: 'MachineHasNoNode',
  machineHasNoCluster: 'MachineHasNoCluster',
  nodeNotFound: 'NodeNotFound',
  nodeBeingDeleted: 'NodeBeingDeleted',
  nodeNotReady: 'NodeNotReady',
  drainBlocked: 'DrainBlocked',
  drainTimeout: 'DrainTimeout',
  nodeAgentFailed: 'NodeAgentFailed',
  nodeUpgradeJobFailed: 'NodeUpgradeJobFailed',
  nodeUpgradeTimeout: 'NodeUpgradeTimeout',
  nodeVersionTimeout: 'NodeVersionTimeout',
  invalidInput: 'InvalidNodeUpgrade',
} as const;

/** Drain pacing: a refused (429) eviction is retried after 1 s, doubling up to 5 s; terminations are polled at 0.5 s. */
export const DRAIN_BACKOFF_MIN_MS = 1_000;
export const DRAIN_BACKOFF_MAX_MS = 5_000;
const DRAIN_WAIT_MS = 500;
/** A pod still there this long after its deletionTimestamp (end of its grace period) is force-deleted. */
export const STUCK_TERMINATING_MS = 30_000;
/** The same under an on-call forceDrain. */
export const STUCK_TERMINATING_FORCE_NOW_MS = 5_000;
/** The Job executor gives up this long after the Job's own deadline should have ended it. */
const JOB_DEADLINE_SLACK_MS = 30_000;

const CAPI_GROUP = 'cluster.x-k8s.io';
const CAPI_VERSION = 'v1beta2';
const CONTROL_PLANE_LABEL = 'node-role.kubernetes.io/control-plane';
const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
const jsonPatch = setHeaderOptions('Content-Type', PatchStrategy.JsonPatch);

/** What the drain heartbeats: the progress the workflow shows, plus what a retried attempt resumes from. */
export interface DrainCheckpoint extends DrainProgress {
  /** When the first attempt started (epoch ms): pdbForceDrainTimeoutMs and timeoutMs count from here. */
  startedAtMs: number;
  counts: DrainResult;
}

/** What upgradeNode and waitForNodeVersion heartbeat. */
export interface WaitCheckpoint {
  startedAtMs: number;
  /** What was last seen: request phase, Job state, or kubelet version and readiness. */
  observed: string;
}

// ---- the NodeUpgradeRequest custom resource ----------------------------------------------

export interface NodeUpgradeRequestSpec {
  nodeName: string;
  machineRef: MachineRef;
  kubernetesVersion: string;
  bootstrapFiles: unknown[];
}

export type NodeUpgradePhase = 'Pending' | 'Running' | 'Succeeded' | 'Failed';

export interface NodeUpgradeRequest {
  apiVersion: string;
  kind: string;
  metadata: {
    name: string;
    namespace: string;
    generation?: number;
    labels?: Record<string, string>;
    resourceVersion?: string;
  };
  spec: NodeUpgradeRequestSpec;
  status?: { phase?: NodeUpgradePhase; message?: string; observedGeneration?: number };
}

const str = { type: 'string' };

/**
 * The CustomResourceDefinition of NodeUpgradeRequest, in wire format (the same as
 * config/crd/nodeupgraderequests.yaml; a test keeps the two equal). upgradeNode installs it in
 * the workload cluster when it is missing.
 */
export const NODE_UPGRADE_REQUEST_CRD = {
  apiVersion: 'apiextensions.k8s.io/v1',
  kind: 'CustomResourceDefinition',
  metadata: {
    name: `${NODE_UPGRADE_PLURAL}.${NODE_UPGRADE_GROUP}`,
    labels: { [MANAGED_BY_LABEL]: MANAGED_BY },
  },
  spec: {
    group: NODE_UPGRADE_GROUP,
    names: {
      kind: NODE_UPGRADE_KIND,
      listKind: `${NODE_UPGRADE_KIND}List`,
      plural: NODE_UPGRADE_PLURAL,
      singular: 'nodeupgraderequest',
      shortNames: ['nur'],
      categories: ['capi-upgrade-orchestrator'],
    },
    scope: 'Namespaced',
    versions: [
      {
        name: NODE_UPGRADE_VERSION,
        served: true,
        storage: true,
        subresources: { status: {} },
        selectableFields: [{ jsonPath: '.spec.nodeName' }],
        additionalPrinterColumns: [
          { name: 'Node', type: 'string', jsonPath: '.spec.nodeName' },
          { name: 'Version', type: 'string', jsonPath: '.spec.kubernetesVersion' },
          { name: 'Phase', type: 'string', jsonPath: '.status.phase' },
          { name: 'Message', type: 'string', jsonPath: '.status.message', priority: 1 },
          { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' },
        ],
        schema: {
          openAPIV3Schema: {
            type: 'object',
            description:
              'A request to upgrade one node in place, written by capi-upgrade-orchestrator for an agent on the node. ' +
              'The agent reports in status; it sets status.observedGeneration to the metadata.generation it acted on.',
            required: ['spec'],
            properties: {
              apiVersion: str,
              kind: str,
              metadata: { type: 'object' },
              spec: {
                type: 'object',
                required: ['nodeName', 'kubernetesVersion'],
                properties: {
                  nodeName: { type: 'string', minLength: 1, description: 'The Node to upgrade.' },
                  machineRef: {
                    type: 'object',
                    description: 'The Cluster API Machine of the node (in the management cluster).',
                    required: ['namespace', 'name'],
                    properties: { namespace: str, name: str },
                  },
                  kubernetesVersion: {
                    type: 'string',
                    minLength: 1,
                    description: 'Desired Kubernetes (kubelet) version, e.g. v1.33.1.',
                  },
                  bootstrapFiles: {
                    type: 'array',
                    description: 'Desired bootstrap files of the node (KubeadmConfig spec.files).',
                    items: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true },
                  },
                },
              },
              status: {
                type: 'object',
                properties: {
                  phase: { type: 'string', enum: ['Pending', 'Running', 'Succeeded', 'Failed'] },
                  message: str,
                  observedGeneration: { type: 'integer', format: 'int64' },
                },
              },
            },
          },
        },
      },
    ],
  },
} as const;

// ---- the Job executor ---------------------------------------------------------------------

export const DEFAULT_JOB_IMAGE = 'docker.io/library/alpine:3.22';

/**
 * The default node upgrade script. It runs as root in the host's namespaces with
 * KUBERNETES_VERSION (e.g. v1.33.1), UPGRADE_MODE (`apply` on the first control-plane node,
 * else `node`) and NODE_NAME set.
 */
export const DEFAULT_JOB_SCRIPT = `set -eu
VERSION="\${KUBERNETES_VERSION#v}"
MINOR="$(echo "$VERSION" | cut -d. -f1-2)"
log() { echo "[node-upgrade] $*"; }
if command -v apt-get >/dev/null 2>&1; then
  # pkgs.k8s.io has one repository per minor version.
  for f in /etc/apt/sources.list.d/kubernetes.list /etc/apt/sources.list.d/kubernetes.sources; do
    if [ -f "$f" ]; then sed -i -E "s#/v[0-9]+\\.[0-9]+/#/v$MINOR/#g" "$f"; fi
  done
  apt-get update -q
  install_pkgs() {
    pkgs=""
    for p in "$@"; do pkgs="$pkgs $p=$VERSION-*"; done
    # shellcheck disable=SC2086
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --allow-change-held-packages $pkgs
    apt-mark hold "$@"
  }
elif command -v dnf >/dev/null 2>&1 || command -v yum >/dev/null 2>&1; then
  PM="$(command -v dnf || command -v yum)"
  if [ -f /etc/yum.repos.d/kubernetes.repo ]; then
    sed -i -E "s#/v[0-9]+\\.[0-9]+/#/v$MINOR/#g" /etc/yum.repos.d/kubernetes.repo
  fi
  install_pkgs() {
    pkgs=""
    for p in "$@"; do pkgs="$pkgs $p-$VERSION"; done
    # shellcheck disable=SC2086
    "$PM" install -y --disableexcludes=kubernetes $pkgs
  }
else
  log "no apt-get, dnf or yum on node $NODE_NAME: cannot install Kubernetes packages"
  exit 1
fi
log "node $NODE_NAME: installing kubeadm $VERSION"
install_pkgs kubeadm
if [ "$UPGRADE_MODE" = apply ]; then
  log "kubeadm upgrade apply v$VERSION (first control-plane node)"
  kubeadm upgrade apply -y "v$VERSION"
else
  log "kubeadm upgrade node"
  kubeadm upgrade node
fi
log "installing kubelet and kubectl $VERSION"
install_pkgs kubelet kubectl
systemctl daemon-reload
systemctl restart kubelet
log "done"
`;

export interface UpgradeJobParams {
  name: string;
  namespace: string;
  nodeName: string;
  version: string;
  mode: 'apply' | 'node';
  image: string;
  script: string;
  backoffLimit: number;
  timeoutMs: number;
}

/** The privileged Job that runs the node upgrade script on the node (pure: no I/O). */
export function upgradeJob(p: UpgradeJobParams): V1Job {
  const labels: Record<string, string> = { [MANAGED_BY_LABEL]: MANAGED_BY, ...nodeLabel(p.nodeName) };
  return {
    apiVersion: 'batch/v1',
    kind: 'Job',
    metadata: { name: p.name, namespace: p.namespace, labels },
    spec: {
      backoffLimit: p.backoffLimit,
      activeDeadlineSeconds: Math.max(1, Math.ceil(p.timeoutMs / 1000)),
      ttlSecondsAfterFinished: 86_400,
      template: {
        metadata: { labels },
        spec: {
          nodeName: p.nodeName,
          hostPID: true,
          hostNetwork: true,
          restartPolicy: 'Never',
          // Runs on the cordoned node whatever its taints.
          tolerations: [{ operator: 'Exists' }],
          containers: [
            {
              name: 'upgrade',
              image: p.image,
              command: ['nsenter', '--target', '1', '--mount', '--uts', '--ipc', '--net', '--', '/bin/sh', '-c'],
              args: [p.script],
              env: [
                { name: 'KUBERNETES_VERSION', value: p.version },
                { name: 'UPGRADE_MODE', value: p.mode },
                { name: 'NODE_NAME', value: p.nodeName },
              ],
              securityContext: { privileged: true },
              volumeMounts: [{ name: 'host', mountPath: '/host' }],
            },
          ],
          volumes: [{ name: 'host', hostPath: { path: '/' } }],
        },
      },
    },
  };
}

// ---- activities -----------------------------------------------------------------------------

export function createMachineUpdateActivities(deps: MachineUpdateActivityDeps): MachineUpdateActivities {
  const custom = deps.management.makeApiClient(CustomObjectsApi);
  const namespace = deps.workloadNamespace ?? DEFAULT_WORKLOAD_NAMESPACE;
  const pollMs = deps.pollIntervalMs ?? 2_000;
  const workload = async (cluster: MachineRef) => await workloadKubeConfig(deps.management, cluster);

  return {
    async preflight({ machine }): Promise<PreflightResult> {
      const who = `Machine ${machine.namespace}/${machine.name}`;
      let obj: MachineObject;
      try {
        obj = (await custom.getNamespacedCustomObject({
          group: CAPI_GROUP,
          version: CAPI_VERSION,
          plural: 'machines',
          namespace: machine.namespace,
          name: machine.name,
        })) as MachineObject;
      } catch (err) {
        if (isNotFound(err)) {
          throw ApplicationFailure.nonRetryable(`${who} not found`, MACHINE_UPDATE_FAILURES.machineNotFound);
        }
        throw err;
      }
      const clusterName = obj.spec?.clusterName;
      if (!clusterName) {
        throw ApplicationFailure.nonRetryable(
          `${who} has no spec.clusterName`,
          MACHINE_UPDATE_FAILURES.machineHasNoCluster,
        );
      }
      const nodeName = obj.status?.nodeRef?.name;
      if (!nodeName) {
        throw ApplicationFailure.retryable(
          `${who}: machine has no nodeRef yet`,
          MACHINE_UPDATE_FAILURES.machineHasNoNode,
        );
      }
      const core = (await workload({ namespace: machine.namespace, name: clusterName })).makeApiClient(CoreV1Api);
      const node = await readNodeOrFail(core, nodeName, `of ${who}`);
      if (node.metadata?.deletionTimestamp) {
        throw ApplicationFailure.nonRetryable(
          `node ${nodeName} of ${who} is being deleted`,
          MACHINE_UPDATE_FAILURES.nodeBeingDeleted,
        );
      }
      const ready = readyCondition(node);
      if (ready?.status !== 'True') {
        throw ApplicationFailure.retryable(
          `node ${nodeName} of ${who} is not Ready (${describeReady(node)})`,
          MACHINE_UPDATE_FAILURES.nodeNotReady,
        );
      }
      return { nodeName, clusterName };
    },

    async cordon({ cluster, nodeName }): Promise<{ wasUnschedulable: boolean }> {
      const core = (await workload(cluster)).makeApiClient(CoreV1Api);
      return await retryOnConflict(async () => {
        const node = await readNodeOrFail(core, nodeName);
        const ours = node.metadata?.annotations?.[CORDONED_BY_ANNOTATION] === CORDONED_BY_US;
        // Cordoned already: by us (an earlier attempt) it was not unschedulable before; by anyone else it was.
        if (node.spec?.unschedulable) return { wasUnschedulable: !ours };
        await core.patchNode(
          {
            name: nodeName,
            body: {
              metadata: {
                resourceVersion: node.metadata?.resourceVersion,
                annotations: { [CORDONED_BY_ANNOTATION]: CORDONED_BY_US },
              },
              spec: { unschedulable: true },
            },
          },
          mergePatch,
        );
        return { wasUnschedulable: false };
      });
    },

    async uncordon({ cluster, nodeName }): Promise<void> {
      const core = (await workload(cluster)).makeApiClient(CoreV1Api);
      await retryOnConflict(async () => {
        let node: V1Node;
        try {
          node = await core.readNode({ name: nodeName });
        } catch (err) {
          if (isNotFound(err)) return; // nothing left to give back
          throw err;
        }
        // Only our own cordon is undone; someone else's stays.
        if (node.metadata?.annotations?.[CORDONED_BY_ANNOTATION] !== CORDONED_BY_US) return;
        await core.patchNode(
          {
            name: nodeName,
            body: {
              metadata: {
                resourceVersion: node.metadata.resourceVersion,
                annotations: { [CORDONED_BY_ANNOTATION]: null },
              },
              spec: { unschedulable: false },
            },
          },
          mergePatch,
        );
      });
    },

    async drain({ cluster, nodeName, options }): Promise<DrainResult> {
      const ctx = Context.current();
      const previous = drainCheckpoint(ctx.info.heartbeatDetails);
      const startedAtMs = previous?.startedAtMs ?? Date.now();
      const counts: DrainResult = previous
        ? { ...previous.counts }
        : { evicted: 0, deleted: 0, forceDeleted: 0, skipped: 0 };
      const kc = await workload(cluster);
      const drainer = new NodeDrainer(kc, nodeName, options);
      let backoffMs = DRAIN_BACKOFF_MIN_MS;
      let lastBlocked: PdbBlock[] = [];
      for (;;) {
        await throwIfCancelled(ctx);
        const round = await drainer.survey();
        counts.skipped = round.verdict.skip.length;
        if (round.verdict.blockers.length > 0) {
          throw ApplicationFailure.nonRetryable(
            `cannot drain node ${nodeName}: ${summarizeDrain(round.verdict)}`,
            MACHINE_UPDATE_FAILURES.drainBlocked,
          );
        }
        if (round.verdict.evict.length === 0 && round.terminating.length === 0) {
          ctx.heartbeat({
            remaining: 0,
            summary: drainSummary(round, []),
            startedAtMs,
            counts,
          } satisfies DrainCheckpoint);
          return counts;
        }
        const elapsed = Date.now() - startedAtMs;
        if (elapsed > options.timeoutMs) {
          throw ApplicationFailure.nonRetryable(
            `drain of node ${nodeName} did not finish within ${seconds(options.timeoutMs)}: ${drainSummary(round, lastBlocked)}`,
            MACHINE_UPDATE_FAILURES.drainTimeout,
          );
        }
        const forcing =
          options.forceNow === true ||
          (options.pdbForceDrainTimeoutMs !== undefined && elapsed >= options.pdbForceDrainTimeoutMs);
        let progressed = false;

        // Pods that outlive their grace period: force-deleted, as managed-upgrade-operator does.
        const stuckAfter = options.forceNow ? STUCK_TERMINATING_FORCE_NOW_MS : STUCK_TERMINATING_MS;
        for (const pod of round.terminating) {
          if (Date.now() < terminationDeadline(pod) + stuckAfter) continue;
          await throwIfCancelled(ctx);
          if (await drainer.remove(pod, 0)) {
            counts.forceDeleted++;
            progressed = true;
          }
        }

        const blocked: PdbBlock[] = [];
        for (const pod of round.verdict.evict) {
          await throwIfCancelled(ctx);
          const outcome = await drainer.evict(pod);
          if (outcome === 'evicted') {
            counts.evicted++;
            progressed = true;
          } else if (outcome !== 'gone') {
            if (forcing) {
              // Past pdbForceDrainTimeout (or forced by on-call): the budget is overridden.
              if (await drainer.remove(pod, options.gracePeriodSeconds)) {
                counts.deleted++;
                progressed = true;
              }
            } else {
              blocked.push(outcome);
            }
          }
        }
        lastBlocked = blocked;
        const remaining = round.verdict.evict.length + round.terminating.length;
        ctx.heartbeat({
          remaining,
          summary: drainSummary(round, blocked),
          startedAtMs,
          counts,
        } satisfies DrainCheckpoint);
        if (blocked.length > 0) {
          await ctx.sleep(backoffMs);
          backoffMs = progressed ? DRAIN_BACKOFF_MIN_MS : Math.min(backoffMs * 2, DRAIN_BACKOFF_MAX_MS);
        } else {
          backoffMs = DRAIN_BACKOFF_MIN_MS;
          await ctx.sleep(DRAIN_WAIT_MS);
        }
      }
    },

    async upgradeNode(input: NodeUpgradeInput): Promise<{ message: string }> {
      const ctx = Context.current();
      const startedAtMs = waitCheckpoint(ctx.info.heartbeatDetails)?.startedAtMs ?? Date.now();
      if (!input.requestName) {
        throw ApplicationFailure.nonRetryable('upgradeNode needs a requestName', MACHINE_UPDATE_FAILURES.invalidInput);
      }
      const kc = await workload(input.cluster);
      switch (input.executor) {
        case 'delegate':
          return await delegateUpgrade(kc, namespace, pollMs, input, startedAtMs);
        case 'job':
          return await jobUpgrade(kc, namespace, pollMs, deps.job ?? {}, input, startedAtMs);
        default:
          throw ApplicationFailure.nonRetryable(
            `unknown node upgrade executor ${JSON.stringify(input.executor)} (want delegate or job)`,
            MACHINE_UPDATE_FAILURES.invalidInput,
          );
      }
    },

    async waitForNodeVersion({ cluster, nodeName, version, timeoutMs }): Promise<void> {
      const ctx = Context.current();
      const startedAtMs = waitCheckpoint(ctx.info.heartbeatDetails)?.startedAtMs ?? Date.now();
      const core = (await workload(cluster)).makeApiClient(CoreV1Api);
      for (;;) {
        let observed: string;
        try {
          const node = await core.readNode({ name: nodeName });
          const kubelet = node.status?.nodeInfo?.kubeletVersion ?? '';
          const ready = readyCondition(node)?.status === 'True';
          if (kubelet && kubeletMatches(kubelet, version) && ready) return;
          observed = `kubelet ${kubelet || 'unknown'}, ${describeReady(node)}`;
        } catch (err) {
          if (!isNotFound(err)) throw err;
          observed = 'node not found'; // re-registering after the upgrade, perhaps
        }
        ctx.heartbeat({ startedAtMs, observed } satisfies WaitCheckpoint);
        if (Date.now() - startedAtMs > timeoutMs) {
          throw ApplicationFailure.nonRetryable(
            `node ${nodeName} did not report kubelet ${version} and Ready within ${seconds(timeoutMs)}: ${observed}`,
            MACHINE_UPDATE_FAILURES.nodeVersionTimeout,
          );
        }
        await ctx.sleep(pollMs);
      }
    },

    async markNodeFailed({ cluster, nodeName, reason }): Promise<void> {
      const core = (await workload(cluster)).makeApiClient(CoreV1Api);
      try {
        await core.patchNode(
          {
            name: nodeName,
            body: {
              metadata: { annotations: { [UPDATE_FAILED_ANNOTATION]: truncate(reason, UPDATE_FAILED_MAX_LENGTH) } },
            },
          },
          mergePatch,
        );
      } catch (err) {
        if (!isNotFound(err)) throw err; // a node that is gone needs no mark
      }
    },
  };
}

// ---- helpers ------------------------------------------------------------------------------

interface MachineObject {
  spec?: { clusterName?: string };
  status?: { nodeRef?: { name?: string } };
}

async function readNodeOrFail(core: CoreV1Api, name: string, of = ''): Promise<V1Node> {
  try {
    return await core.readNode({ name });
  } catch (err) {
    if (isNotFound(err)) {
      throw ApplicationFailure.nonRetryable(
        `node ${name}${of ? ` ${of}` : ''} not found in the workload cluster`,
        MACHINE_UPDATE_FAILURES.nodeNotFound,
      );
    }
    throw err;
  }
}

function readyCondition(node: V1Node) {
  return node.status?.conditions?.find((c) => c.type === 'Ready');
}

function describeReady(node: V1Node): string {
  const ready = readyCondition(node);
  if (!ready) return 'no Ready condition';
  return `Ready=${ready.status}${ready.reason ? `: ${ready.reason}` : ''}`;
}

async function retryOnConflict<T>(fn: () => Promise<T>, attempts = 5): Promise<T> {
  for (let i = 1; ; i++) {
    try {
      return await fn();
    } catch (err) {
      if (i >= attempts || !isConflict(err)) throw err;
    }
  }
}

/** Awaiting `ctx.cancelled` throws the SDK's CancelledFailure. */
async function throwIfCancelled(ctx: Context): Promise<void> {
  if (ctx.cancellationSignal.aborted) await ctx.cancelled;
}

function seconds(ms: number): string {
  return `${Math.round(ms / 100) / 10}s`;
}

/** At most `max` characters (code points), with an ellipsis when cut. */
export function truncate(text: string, max: number): string {
  const chars = [...text];
  return chars.length <= max ? text : `${chars.slice(0, max - 1).join('')}…`;
}

const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;

function nodeLabel(nodeName: string): Record<string, string> {
  return nodeName.length <= 63 && LABEL_VALUE.test(nodeName) ? { [NODE_NAME_LABEL]: nodeName } : {};
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function drainCheckpoint(details: unknown): DrainCheckpoint | undefined {
  if (!isRecord(details) || typeof details.startedAtMs !== 'number' || !isRecord(details.counts)) return undefined;
  const c = details.counts;
  const n = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) ? v : 0);
  return {
    startedAtMs: details.startedAtMs,
    remaining: n(details.remaining),
    summary: typeof details.summary === 'string' ? details.summary : '',
    counts: { evicted: n(c.evicted), deleted: n(c.deleted), forceDeleted: n(c.forceDeleted), skipped: n(c.skipped) },
  };
}

function waitCheckpoint(details: unknown): WaitCheckpoint | undefined {
  if (!isRecord(details) || typeof details.startedAtMs !== 'number') return undefined;
  return { startedAtMs: details.startedAtMs, observed: typeof details.observed === 'string' ? details.observed : '' };
}

// ---- drain --------------------------------------------------------------------------------

interface DrainRound {
  verdict: DrainFilterResult<V1Pod>;
  /** Pods on their way out that the drain waits for (not DaemonSet, mirror or skip-labelled ones). */
  terminating: V1Pod[];
}

function drainSummary(round: DrainRound, blocked: readonly PdbBlock[]): string {
  const line = summarizeDrain(round.verdict, blocked);
  const n = round.terminating.length;
  return n === 0 ? line : `${line}; waiting for ${n} terminating ${n === 1 ? 'pod' : 'pods'}`;
}

/** When a terminating pod's grace period ends (its deletionTimestamp). */
function terminationDeadline(pod: V1Pod): number {
  const ts = pod.metadata?.deletionTimestamp;
  return ts ? new Date(ts).getTime() : Date.now();
}

class NodeDrainer {
  private readonly core: CoreV1Api;
  private readonly policy: PolicyV1Api;
  private readonly nodeName: string;
  private readonly options: DrainOptions;
  private pdbs = new Map<string, V1PodDisruptionBudget[]>();

  constructor(kc: KubeConfig, nodeName: string, options: DrainOptions) {
    this.core = kc.makeApiClient(CoreV1Api);
    this.policy = kc.makeApiClient(PolicyV1Api);
    this.nodeName = nodeName;
    this.options = options;
  }

  /** The node's pods sorted with kubectl-drain rules; pods being deleted are waited for unless drains skip them. */
  async survey(): Promise<DrainRound> {
    this.pdbs.clear();
    const pods = (await this.core.listPodForAllNamespaces({ fieldSelector: `spec.nodeName=${this.nodeName}` })).items;
    const filterOptions = { deleteEmptyDirData: this.options.deleteEmptyDirData, force: this.options.force };
    const live = pods.filter((p) => !p.metadata?.deletionTimestamp);
    const terminating = pods.filter((p) => {
      if (!p.metadata?.deletionTimestamp) return false;
      const asLive: V1Pod = { ...p, metadata: { ...p.metadata, deletionTimestamp: undefined } };
      const v = filterPodsForDrain([asLive], { deleteEmptyDirData: true, force: true });
      return v.evict.length > 0;
    });
    return { verdict: filterPodsForDrain(live, filterOptions), terminating };
  }

  /** Evicts through the Eviction API: `evicted`, `gone` (already gone or replaced), or the PDB that refused. */
  async evict(pod: V1Pod): Promise<'evicted' | 'gone' | PdbBlock> {
    const name = pod.metadata?.name ?? '';
    const namespace = pod.metadata?.namespace ?? '';
    const uid = pod.metadata?.uid;
    try {
      await this.core.createNamespacedPodEviction({
        name,
        namespace,
        body: {
          apiVersion: 'policy/v1',
          kind: 'Eviction',
          metadata: { name, namespace },
          deleteOptions: {
            ...(this.options.gracePeriodSeconds !== undefined
              ? { gracePeriodSeconds: this.options.gracePeriodSeconds }
              : {}),
            ...(uid ? { preconditions: { uid } } : {}),
          },
        },
      });
      return 'evicted';
    } catch (err) {
      if (isNotFound(err) || isConflict(err)) return 'gone';
      if (isTooManyRequests(err)) return { namespace, pod: name, pdb: await this.pdbFor(pod, err) };
      throw err;
    }
  }

  /** Deletes the pod (grace `gracePeriodSeconds`, the pod's own when unset); false when it was already gone. */
  async remove(pod: V1Pod, gracePeriodSeconds: number | undefined): Promise<boolean> {
    const uid = pod.metadata?.uid;
    try {
      await this.core.deleteNamespacedPod({
        name: pod.metadata?.name ?? '',
        namespace: pod.metadata?.namespace ?? '',
        ...(gracePeriodSeconds !== undefined ? { gracePeriodSeconds } : {}),
        body: {
          ...(gracePeriodSeconds !== undefined ? { gracePeriodSeconds } : {}),
          ...(uid ? { preconditions: { uid } } : {}),
        },
      });
      return true;
    } catch (err) {
      if (isNotFound(err) || isConflict(err)) return false;
      throw err;
    }
  }

  /** The PodDisruptionBudget(s) covering the pod; else the name in the API's refusal; else `unknown`. */
  private async pdbFor(pod: V1Pod, err: unknown): Promise<string> {
    const namespace = pod.metadata?.namespace ?? '';
    let pdbs = this.pdbs.get(namespace);
    if (!pdbs) {
      pdbs = (await this.policy.listNamespacedPodDisruptionBudget({ namespace })).items;
      this.pdbs.set(namespace, pdbs);
    }
    const labels = pod.metadata?.labels ?? {};
    const names = pdbs
      .filter((b) => selectorMatches(b.spec?.selector, labels))
      .map((b) => b.metadata?.name ?? '')
      .sort();
    if (names.length > 0) return names.join(',');
    return /disruption budget ([a-z0-9][-a-z0-9.]*)/.exec(errorText(err))?.[1] ?? 'unknown';
  }
}

function errorText(err: unknown): string {
  if (isRecord(err) && 'body' in err) {
    const body = err.body;
    return typeof body === 'string' ? body : JSON.stringify(body ?? '');
  }
  return err instanceof Error ? err.message : String(err);
}

// ---- node upgrade: delegate -------------------------------------------------------------

function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  if (isRecord(v)) {
    return `{${Object.keys(v)
      .filter((k) => v[k] !== undefined)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonical(v[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(v) ?? 'null';
}

async function delegateUpgrade(
  kc: KubeConfig,
  namespace: string,
  pollMs: number,
  input: NodeUpgradeInput,
  startedAtMs: number,
): Promise<{ message: string }> {
  const ctx = Context.current();
  const custom = kc.makeApiClient(CustomObjectsApi);
  const ref = { group: NODE_UPGRADE_GROUP, version: NODE_UPGRADE_VERSION, plural: NODE_UPGRADE_PLURAL, namespace };
  const name = input.requestName;
  const where = `${NODE_UPGRADE_KIND} ${namespace}/${name}`;
  const spec: NodeUpgradeRequestSpec = {
    nodeName: input.nodeName,
    machineRef: { namespace: input.machine.namespace, name: input.machine.name },
    kubernetesVersion: input.version,
    bootstrapFiles: input.files,
  };

  const ensure = async (): Promise<NodeUpgradeRequest> => {
    let existing: NodeUpgradeRequest | undefined;
    try {
      existing = (await custom.getNamespacedCustomObject({ ...ref, name })) as NodeUpgradeRequest;
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
    if (existing) {
      if (canonical(existing.spec) === canonical(spec)) return existing;
      // Same name, other spec: the agent must act on the new generation.
      return (await custom.patchNamespacedCustomObject(
        { ...ref, name, body: [{ op: 'replace', path: '/spec', value: spec }] },
        jsonPatch,
      )) as NodeUpgradeRequest;
    }
    const body: NodeUpgradeRequest = {
      apiVersion: `${NODE_UPGRADE_GROUP}/${NODE_UPGRADE_VERSION}`,
      kind: NODE_UPGRADE_KIND,
      metadata: { name, namespace, labels: { [MANAGED_BY_LABEL]: MANAGED_BY, ...nodeLabel(input.nodeName) } },
      spec,
    };
    try {
      return (await custom.createNamespacedCustomObject({ ...ref, body })) as NodeUpgradeRequest;
    } catch (err) {
      if (isConflict(err)) return await ensure(); // created meanwhile (a racing attempt)
      if (isNotFound(err) && (await ensureCrd(kc))) {
        return (await custom.createNamespacedCustomObject({ ...ref, body })) as NodeUpgradeRequest;
      }
      throw err;
    }
  };

  let request = await ensure();
  for (;;) {
    const generation = request.metadata.generation;
    const status = request.status;
    const current = status !== undefined && status.observedGeneration === generation;
    if (current && status.phase === 'Succeeded') {
      return { message: status.message || `node agent reported Succeeded for ${where}` };
    }
    if (current && status.phase === 'Failed') {
      throw ApplicationFailure.nonRetryable(
        `node agent reported Failed: ${status.message || 'no message'}`,
        MACHINE_UPDATE_FAILURES.nodeAgentFailed,
      );
    }
    const observed = current
      ? `phase ${status.phase ?? 'Pending'}`
      : status?.phase
        ? `status of generation ${status.observedGeneration ?? 'unknown'} ignored, want ${generation ?? 'unknown'}`
        : 'no status yet';
    ctx.heartbeat({ startedAtMs, observed } satisfies WaitCheckpoint);
    if (Date.now() - startedAtMs > input.timeoutMs) {
      throw ApplicationFailure.nonRetryable(
        `${where} for node ${input.nodeName} not finished within ${seconds(input.timeoutMs)} (${observed})`,
        MACHINE_UPDATE_FAILURES.nodeUpgradeTimeout,
      );
    }
    await ctx.sleep(pollMs);
    try {
      request = (await custom.getNamespacedCustomObject({ ...ref, name })) as NodeUpgradeRequest;
    } catch (err) {
      if (!isNotFound(err)) throw err;
      request = await ensure(); // deleted by someone: ask again
    }
  }
}

/** Installs the NodeUpgradeRequest CRD when it is missing and waits until it is served; false if it was there. */
async function ensureCrd(kc: KubeConfig): Promise<boolean> {
  const custom = kc.makeApiClient(CustomObjectsApi);
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
  const before = await read();
  if (before && established(before)) return false;
  if (!before) {
    try {
      await custom.createClusterCustomObject({ ...ref, body: NODE_UPGRADE_REQUEST_CRD });
    } catch (err) {
      if (!isConflict(err)) throw err;
    }
  }
  const ctx = Context.current();
  for (let i = 0; i < 60; i++) {
    if (established(await read())) {
      // Established, yet the endpoint may need a moment longer to serve.
      await ctx.sleep(500);
      return true;
    }
    await ctx.sleep(500);
  }
  throw ApplicationFailure.retryable(`CustomResourceDefinition ${name} not established after 30s`, 'CrdNotEstablished');
}

interface CrdObject {
  status?: { conditions?: { type: string; status: string }[] };
}

// ---- node upgrade: job ----------------------------------------------------------------------

async function jobUpgrade(
  kc: KubeConfig,
  namespace: string,
  pollMs: number,
  config: NonNullable<MachineUpdateActivityDeps['job']>,
  input: NodeUpgradeInput,
  startedAtMs: number,
): Promise<{ message: string }> {
  const ctx = Context.current();
  const batch = kc.makeApiClient(BatchV1Api);
  const name = input.requestName;
  const where = `node upgrade Job ${namespace}/${name}`;
  const read = async (): Promise<V1Job | undefined> => {
    try {
      return await batch.readNamespacedJob({ name, namespace });
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  };
  const ensure = async (): Promise<V1Job> => {
    const existing = await read();
    if (existing) return existing;
    const body = upgradeJob({
      name,
      namespace,
      nodeName: input.nodeName,
      version: input.version,
      mode: await upgradeMode(kc.makeApiClient(CoreV1Api), input),
      image: config.image ?? DEFAULT_JOB_IMAGE,
      script: config.script ?? DEFAULT_JOB_SCRIPT,
      backoffLimit: config.backoffLimit ?? 2,
      timeoutMs: input.timeoutMs,
    });
    try {
      return await batch.createNamespacedJob({ namespace, body });
    } catch (err) {
      if (isConflict(err)) return (await read()) ?? (await ensure());
      throw err;
    }
  };

  let job = await ensure();
  for (;;) {
    const conditions = job.status?.conditions ?? [];
    const complete = conditions.find((c) => c.type === 'Complete' && c.status === 'True');
    if (complete) return { message: `${where} completed on node ${input.nodeName}` };
    const failed = conditions.find((c) => c.type === 'Failed' && c.status === 'True');
    if (failed) {
      throw ApplicationFailure.nonRetryable(
        `${where} failed: ${failed.reason ?? 'Failed'}${failed.message ? `: ${failed.message}` : ''}`,
        MACHINE_UPDATE_FAILURES.nodeUpgradeJobFailed,
      );
    }
    const s = job.status;
    const observed = `active ${s?.active ?? 0}, succeeded ${s?.succeeded ?? 0}, failed ${s?.failed ?? 0}`;
    ctx.heartbeat({ startedAtMs, observed } satisfies WaitCheckpoint);
    if (Date.now() - startedAtMs > input.timeoutMs + JOB_DEADLINE_SLACK_MS) {
      throw ApplicationFailure.nonRetryable(
        `${where} not finished within ${seconds(input.timeoutMs)} (${observed})`,
        MACHINE_UPDATE_FAILURES.nodeUpgradeTimeout,
      );
    }
    await ctx.sleep(pollMs);
    job = (await read()) ?? (await ensure());
  }
}

/**
 * `apply` on the first control-plane node of an upgrade (the kubeadm ClusterConfiguration is
 * not at the target version yet), else `node`.
 */
async function upgradeMode(core: CoreV1Api, input: NodeUpgradeInput): Promise<'apply' | 'node'> {
  const node = await readNodeOrFail(core, input.nodeName);
  if (node.metadata?.labels?.[CONTROL_PLANE_LABEL] === undefined) return 'node';
  let config: string | undefined;
  try {
    config = (await core.readNamespacedConfigMap({ name: 'kubeadm-config', namespace: 'kube-system' })).data
      ?.ClusterConfiguration;
  } catch (err) {
    if (!isNotFound(err)) throw err;
  }
  const current = config ? /^kubernetesVersion:\s*["']?([^\s"']+)/m.exec(config)?.[1] : undefined;
  return current !== undefined && !kubeletMatches(current, input.version) ? 'apply' : 'node';
}

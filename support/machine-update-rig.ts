// A fleet of in-place updates on the test bed, shared by the integration test of
// the async node-upgrade wait and bench/machine-updates.ts: N KWOK nodes in the
// workload cluster, N Cluster API Machines pointing at them in the management
// cluster, the kubeconfig Secret, and a stand-in node agent that answers each
// NodeUpgradeRequest when the caller says so (it sets the node's kubelet version,
// then status Succeeded, as a real agent would after kubeadm and a kubelet restart).
import { CustomObjectsApi, Watch } from '@kubernetes/client-node';
import {
  NODE_UPGRADE_GROUP,
  NODE_UPGRADE_PLURAL,
  NODE_UPGRADE_VERSION,
  type NodeUpgradeRequest,
} from '../src/activities/executors/node-upgrade-request-crd.ts';
import type { MachineUpdateInput } from '../src/model/machine-update.ts';
import {
  capiMachine,
  createCapiObject,
  createKubeconfigSecret,
  createNamespace,
  createNodes,
  kwokNode,
  managementApi,
  mergePatch,
  setKubeletVersion,
  sleep,
  type TestGroup,
  workloadApi,
  createWorkloadNamespace,
} from './testbed-fixtures.ts';

export const RIG_OLD_VERSION = 'v1.31.14';
export const RIG_NEW_VERSION = 'v1.31.15';

export interface MachineUpdateRig {
  namespace: string;
  cluster: string;
  machines: string[];
  nodes: string[];
  /** The workflow input for machine `i` (delegate executor: the stand-in agent answers). */
  input(i: number, overrides?: Partial<MachineUpdateInput>): MachineUpdateInput;
}

/** Creates nodes and machines (in batches: the test bed is small). */
export async function createMachineUpdateRig(group: TestGroup, count: number): Promise<MachineUpdateRig> {
  const wl = workloadApi();
  const mg = managementApi();
  const namespace = group.name;
  const cluster = 'wl';
  await Promise.all([createWorkloadNamespace(wl, namespace), createNamespace(mg.core, namespace)]);
  await createKubeconfigSecret(mg.core, namespace, cluster);
  const nodes = Array.from({ length: count }, (_, i) => `${group.name}-n${i}`);
  const machines = Array.from({ length: count }, (_, i) => `m${i}`);
  for (let i = 0; i < count; i += 25) {
    const batch = nodes.slice(i, i + 25);
    await createNodes(
      wl.core,
      batch.map((n) => kwokNode(group, n, { kubeletVersion: RIG_OLD_VERSION })),
    );
    await Promise.all(
      batch.map((n, j) =>
        createCapiObject(mg.custom, capiMachine(machines[i + j]!, namespace, { cluster, nodeName: n })),
      ),
    );
  }
  return {
    namespace,
    cluster,
    machines,
    nodes,
    input: (i, overrides = {}) => ({
      machine: { namespace, name: machines[i]! },
      clusterName: cluster,
      version: RIG_NEW_VERSION,
      specHash: 'rig',
      executor: 'delegate',
      deleteEmptyDirData: false,
      forceDrainUnmanagedPods: false,
      drainTimeoutMs: 5 * 60_000,
      nodeUpgradeTimeoutMs: 10 * 60_000,
      retryBackoffMs: 60_000,
      ...overrides,
    }),
  };
}

export interface StandInAgent {
  /** Requests seen, by name, with when they were first seen. */
  seen: Map<string, number>;
  /** Each node's requests, by uid: a request deleted and made again counts twice. */
  byNode: Map<string, Set<string>>;
  /** The same by `<node>@<kubernetesVersion>` (one desired spec's upgrades of one node). */
  byNodeVersion: Map<string, Set<string>>;
  /** Requests answered Failed (see `fails`). */
  failed: Set<string>;
  /** Requests answered. */
  answered: Set<string>;
  /** Most requests waiting for an answer at one time. */
  maxPending: number;
  stop(): Promise<void>;
}

/**
 * Answers NodeUpgradeRequests in `namespace` (of the workload or the management cluster) once `answer(firstSeenMs, pending)` says so
 * (pending: requests seen and not yet answered, this one included). It watches, as the
 * documented agent loop does (docs/node-upgrade-request.md): listing every request every
 * `checkMs` made the API server and this process serialize the whole (growing) collection
 * ten times a second, CPU the benchmark's two cores then lacked for the updates.
 */
export function startStandInAgent(
  namespace: string,
  answer: (firstSeenMs: number, pending: number) => boolean,
  checkMs = 100,
  /** Where the requests are: `workload` (delegate: an agent) or `management` (a node upgrader). */
  requestsIn: 'workload' | 'management' = 'workload',
  /** When it says so for a due request, the agent answers Failed and leaves the node as it was. */
  fails: (req: NodeUpgradeRequest) => boolean = () => false,
): StandInAgent {
  const wl = workloadApi();
  const at = requestsIn === 'workload' ? wl : managementApi();
  const custom = at.kc.makeApiClient(CustomObjectsApi);
  const ref = { group: NODE_UPGRADE_GROUP, version: NODE_UPGRADE_VERSION, plural: NODE_UPGRADE_PLURAL, namespace };
  const path = `/apis/${NODE_UPGRADE_GROUP}/${NODE_UPGRADE_VERSION}/namespaces/${namespace}/${NODE_UPGRADE_PLURAL}`;
  const agent: StandInAgent = {
    seen: new Map(),
    byNode: new Map(),
    byNodeVersion: new Map(),
    failed: new Set(),
    answered: new Set(),
    maxPending: 0,
    stop: async () => {},
  };
  /** Seen and not yet answered, by name. */
  const pending = new Map<string, NodeUpgradeRequest>();
  let running = true;
  let watching: AbortController | undefined;
  const open = async (): Promise<void> => {
    if (!running) return;
    const reopen = (afterMs: number) => setTimeout(() => void open(), afterMs);
    try {
      watching = await new Watch(at.kc).watch(
        path,
        {},
        (type: string, req: NodeUpgradeRequest) => {
          const name = req.metadata.name;
          if (type === 'DELETED') {
            pending.delete(name);
            return;
          }
          if (type !== 'ADDED' && type !== 'MODIFIED') return;
          if (!agent.seen.has(name)) agent.seen.set(name, Date.now());
          const uids = agent.byNode.get(req.spec.nodeName) ?? new Set<string>();
          if (req.metadata.uid) uids.add(req.metadata.uid);
          agent.byNode.set(req.spec.nodeName, uids);
          const key = `${req.spec.nodeName}@${req.spec.kubernetesVersion}`;
          const forVersion = agent.byNodeVersion.get(key) ?? new Set<string>();
          if (req.metadata.uid) forVersion.add(req.metadata.uid);
          agent.byNodeVersion.set(key, forVersion);
          if (!agent.answered.has(name)) pending.set(name, req);
        },
        // Ended (the server closes watches now and then): open it again; ADDED replays what exists.
        (err: unknown) => {
          if (running) reopen(err ? 500 : 0);
        },
      );
    } catch {
      // The CRD is not installed yet (the first upgradeNode installs it).
      reopen(500);
    }
  };
  void open();
  const loop = (async () => {
    while (running) {
      agent.maxPending = Math.max(agent.maxPending, pending.size);
      const due = [...pending.values()].filter((r) => answer(agent.seen.get(r.metadata.name)!, pending.size));
      await Promise.all(
        due.map(async (req) => {
          const name = req.metadata.name;
          try {
            const failing = fails(req);
            if (!failing) await setKubeletVersion(wl.core, req.spec.nodeName, req.spec.kubernetesVersion);
            await custom.patchNamespacedCustomObjectStatus(
              {
                ...ref,
                name,
                body: {
                  status: {
                    phase: failing ? 'Failed' : 'Succeeded',
                    message: failing ? 'failed by the stand-in agent' : 'upgraded by the stand-in agent',
                    observedGeneration: req.metadata.generation ?? 1,
                  },
                },
              },
              mergePatch,
            );
            if (failing) agent.failed.add(name);
            agent.answered.add(name);
            pending.delete(name);
          } catch {
            // Deleted meanwhile, or the API server was busy: the next round tries again.
          }
        }),
      );
      await sleep(checkMs);
    }
  })();
  agent.stop = async () => {
    running = false;
    watching?.abort();
    await loop;
  };
  return agent;
}

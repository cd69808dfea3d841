// A stand-in infrastructure node upgrader for CAPD's in-memory machines, which
// have no host to upgrade: it plays the node for the `management` executor
// (docs/node-upgrade-request.md) in `make dev`'s embedded management cluster and
// in the real-CAPI tier.
// - It says it is alive: it renews the Lease `node-upgrader-devmachine` in the
//   upgrader namespace, with the capability annotation (in-place paths).
// - It polls NodeUpgradeRequests in the management cluster (every namespace, the
//   requests the extension wrote: label app.kubernetes.io/managed-by), and for
//   each new generation reports Running, then "upgrades" the node through the
//   workload cluster's API: Ready=False for `restartMs` (the kubelet restarting),
//   then status.nodeInfo.kubeletVersion = spec.kubernetesVersion and Ready=True,
//   then reports Succeeded. A Machine listed with failMachine() fails instead
//   (failureReason / failureMessage) without touching its node.
// CAPD's in-memory API server routes no `/status` subresource and takes only merge
// patches (a strategic merge patch is treated as one: lists are replaced whole), but
// its PATCH on the object itself stores status as sent, and its backend creates a
// Node once and never rewrites it (test/infrastructure/docker/internal/controllers/
// backends/inmemory/inmemorymachine_backend.go, reconcileNormalNode): so the Node is
// patched whole, conditions list included. Started and stopped by its owner; stop()
// deletes its Lease and leaves nothing running.
import {
  CoordinationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  KubeConfig,
  PatchStrategy,
  setHeaderOptions,
  type V1Lease,
  type V1NodeCondition,
} from '@kubernetes/client-node';
import {
  NODE_UPGRADE_GROUP as GROUP,
  NODE_UPGRADE_PLURAL as PLURAL,
  NODE_UPGRADE_VERSION as VERSION,
} from '../activities/executors/node-upgrade-request.ts';
import { IN_PLACE_PATHS_ANNOTATION } from '../platform/kube/node-upgraders.ts';
import { CAPI_CORE } from '../platform/kube/capi-api.ts';

const MANAGED_BY = 'app.kubernetes.io/managed-by=capi-upgrade-orchestrator';
const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

interface RequestObject {
  metadata: { name: string; namespace: string; generation?: number; deletionTimestamp?: string };
  spec: {
    nodeName: string;
    kubernetesVersion: string;
    clusterName?: string;
    machineRef?: { namespace?: string; name: string };
  };
  status?: { phase?: string; observedGeneration?: number };
}

/** What the upgrader did with one request generation, for the tests' assertions. */
export interface UpgraderRecord {
  request: string;
  machine: string;
  node: string;
  version: string;
  outcome: 'Succeeded' | 'Failed' | 'Deleted';
  /** When the node reported Ready=False (the kubelet "restart"), ms since the epoch. */
  restartedAt?: number;
  finishedAt: number;
}

export interface StandInUpgraderOptions {
  /** An admin kubeconfig of the management cluster (the tier's API server CAPI runs on). */
  managementKubeconfig: string;
  /** Where the upgrader's Lease lives: the extension's NODE_UPGRADER_NAMESPACE. */
  namespace: string;
  /** Infrastructure machine kind served; the Lease is `node-upgrader-<kind lowercased>`. */
  infrastructureKind?: string;
  /** The capability annotation's value; unset = no annotation (defaults). */
  inPlacePaths?: string;
  /** How long the node reports Ready=False while its kubelet "restarts"; 0 = no restart. */
  restartMs?: number;
  pollMs?: number;
  leaseDurationSeconds?: number;
}

function microTime(ms: number): Date {
  // A MicroTime: six fractional digits on the wire.
  return new Date(ms).toISOString().replace(/\.(\d{3})Z$/, '.$1000Z') as unknown as Date;
}

function statusCode(err: unknown): number | undefined {
  return (err as { code?: number }).code;
}

export class StandInUpgrader {
  readonly records: UpgraderRecord[] = [];
  readonly leaseName: string;
  private readonly opts: Required<Omit<StandInUpgraderOptions, 'inPlacePaths'>> & { inPlacePaths?: string };
  private readonly management: KubeConfig;
  private readonly failures = new Map<string, { reason: string; message: string }>();
  private readonly inFlight = new Map<string, Promise<void>>();
  private readonly workloads = new Map<string, CoreV1Api>();
  private timer: NodeJS.Timeout | undefined;
  private leaseTimer: NodeJS.Timeout | undefined;
  private stopped = false;
  private ticking: Promise<void> = Promise.resolve();
  readonly errors: string[] = [];

  constructor(opts: StandInUpgraderOptions) {
    this.opts = {
      infrastructureKind: 'DevMachine',
      restartMs: 3_000,
      pollMs: 1_000,
      leaseDurationSeconds: 40,
      ...opts,
    };
    this.leaseName = `node-upgrader-${this.opts.infrastructureKind.toLowerCase()}`;
    this.management = new KubeConfig();
    this.management.loadFromFile(opts.managementKubeconfig);
  }

  /** Every request for this Machine (`namespace/name`) fails with `reason: message`, retries too. */
  failMachine(machine: string, reason: string, message: string): void {
    this.failures.set(machine, { reason, message });
  }

  async start(): Promise<void> {
    await this.renewLease();
    this.leaseTimer = setInterval(() => {
      this.renewLease().catch((err: unknown) => this.note(`lease: ${String(err)}`));
    }, 5_000);
    const loop = () => {
      if (this.stopped) return;
      this.ticking = this.tick()
        .catch((err: unknown) => this.note(`poll: ${String(err)}`))
        .finally(() => {
          if (!this.stopped) this.timer = setTimeout(loop, this.opts.pollMs);
        });
    };
    loop();
  }

  /**
   * Withdraws the Lease first (CanUpdate* then claims nothing more in place), keeps serving
   * for `graceMs` the requests of updates CAPI decided just before (other test files' clusters
   * share this upgrader's kind), then stops polling and waits for the requests in flight.
   */
  async stop(graceMs = 20_000): Promise<void> {
    clearInterval(this.leaseTimer);
    await this.management
      .makeApiClient(CoordinationV1Api)
      .deleteNamespacedLease({ name: this.leaseName, namespace: this.opts.namespace })
      .catch(() => undefined);
    await new Promise((r) => setTimeout(r, graceMs));
    this.stopped = true;
    clearTimeout(this.timer);
    await this.ticking;
    await Promise.allSettled(this.inFlight.values());
  }

  private note(line: string): void {
    if (this.errors.length < 200) this.errors.push(line);
  }

  private async renewLease(): Promise<void> {
    const leases = this.management.makeApiClient(CoordinationV1Api);
    const body: V1Lease = {
      metadata: {
        name: this.leaseName,
        namespace: this.opts.namespace,
        ...(this.opts.inPlacePaths !== undefined
          ? { annotations: { [IN_PLACE_PATHS_ANNOTATION]: this.opts.inPlacePaths } }
          : {}),
      },
      spec: {
        holderIdentity: 'capi-tier-stand-in-upgrader',
        leaseDurationSeconds: this.opts.leaseDurationSeconds,
        renewTime: microTime(Date.now()),
      },
    };
    try {
      await leases.patchNamespacedLease({ name: this.leaseName, namespace: this.opts.namespace, body }, mergePatch);
    } catch (err) {
      if (statusCode(err) !== 404) throw err;
      await leases.createNamespacedLease({ namespace: this.opts.namespace, body });
    }
  }

  private async tick(): Promise<void> {
    const custom = this.management.makeApiClient(CustomObjectsApi);
    const list = (await custom.listClusterCustomObject({
      group: GROUP,
      version: VERSION,
      plural: PLURAL,
      labelSelector: MANAGED_BY,
    })) as { items: RequestObject[] };
    for (const request of list.items) {
      const key = `${request.metadata.namespace}/${request.metadata.name}@${request.metadata.generation ?? 0}`;
      if (this.inFlight.has(key) || request.metadata.deletionTimestamp) continue;
      const acted = request.status?.observedGeneration === (request.metadata.generation ?? 0);
      if (acted && request.status?.phase !== 'Pending' && request.status?.phase !== undefined) continue;
      const work = this.serve(request)
        .catch((err: unknown) => this.note(`${key}: ${String(err)}`))
        .finally(() => {
          // Keep the key while the request lives: its status now says it was acted on.
          setTimeout(() => this.inFlight.delete(key), 60_000).unref();
        });
      this.inFlight.set(key, work);
    }
  }

  private async setStatus(request: RequestObject, status: Record<string, unknown>): Promise<boolean> {
    const custom = this.management.makeApiClient(CustomObjectsApi);
    try {
      await custom.patchNamespacedCustomObjectStatus(
        {
          group: GROUP,
          version: VERSION,
          plural: PLURAL,
          namespace: request.metadata.namespace,
          name: request.metadata.name,
          body: { status: { observedGeneration: request.metadata.generation ?? 0, ...status } },
        },
        mergePatch,
      );
      return true;
    } catch (err) {
      if (statusCode(err) === 404) return false; // deleted: stop now
      throw err;
    }
  }

  private async serve(request: RequestObject): Promise<void> {
    const { nodeName, kubernetesVersion: version } = request.spec;
    const namespace = request.spec.machineRef?.namespace ?? request.metadata.namespace;
    const machine = `${namespace}/${request.spec.machineRef?.name ?? '?'}`;
    const record = (outcome: UpgraderRecord['outcome'], restartedAt?: number): void => {
      this.records.push({
        request: `${request.metadata.namespace}/${request.metadata.name}`,
        machine,
        node: nodeName,
        version,
        outcome,
        ...(restartedAt !== undefined ? { restartedAt } : {}),
        finishedAt: Date.now(),
      });
    };
    if (!(await this.setStatus(request, { phase: 'Running', message: `upgrading node ${nodeName} to ${version}` })))
      return record('Deleted');
    const failure = this.failures.get(machine);
    if (failure) {
      const ok = await this.setStatus(request, {
        phase: 'Failed',
        failureReason: failure.reason,
        failureMessage: failure.message,
        message: `${failure.reason}: ${failure.message}`,
      });
      return record(ok ? 'Failed' : 'Deleted');
    }
    const core = await this.workload(namespace, request.spec.clusterName ?? (await this.clusterOf(machine)));
    let restartedAt: number | undefined;
    if (this.opts.restartMs > 0) {
      await this.patchNode(core, nodeName, { ready: false });
      restartedAt = Date.now();
      await new Promise((r) => setTimeout(r, this.opts.restartMs));
    }
    await this.patchNode(core, nodeName, { ready: true, kubeletVersion: version });
    const ok = await this.setStatus(request, { phase: 'Succeeded', message: `node ${nodeName} runs ${version}` });
    record(ok ? 'Succeeded' : 'Deleted', restartedAt);
  }

  private async clusterOf(machine: string): Promise<string> {
    const [namespace, name] = machine.split('/') as [string, string];
    const custom = this.management.makeApiClient(CustomObjectsApi);
    const m = (await custom.getNamespacedCustomObject({
      ...CAPI_CORE,
      plural: 'machines',
      namespace,
      name,
    })) as { spec: { clusterName: string } };
    return m.spec.clusterName;
  }

  private async workload(namespace: string, cluster: string): Promise<CoreV1Api> {
    const key = `${namespace}/${cluster}`;
    let api = this.workloads.get(key);
    if (!api) {
      const secret = await this.management
        .makeApiClient(CoreV1Api)
        .readNamespacedSecret({ namespace, name: `${cluster}-kubeconfig` });
      const kc = new KubeConfig();
      kc.loadFromString(Buffer.from(secret.data?.value ?? '', 'base64').toString('utf8'));
      api = kc.makeApiClient(CoreV1Api);
      this.workloads.set(key, api);
    }
    return api;
  }

  /** The kubelet's report: Ready (and the version it runs), as a merge patch of the whole Node. */
  private async patchNode(
    core: CoreV1Api,
    nodeName: string,
    change: { ready: boolean; kubeletVersion?: string },
  ): Promise<void> {
    const node = await core.readNode({ name: nodeName });
    const now = new Date();
    const conditions: V1NodeCondition[] = (node.status?.conditions ?? []).map((c) =>
      c.type !== 'Ready'
        ? c
        : {
            ...c,
            status: change.ready ? 'True' : 'False',
            reason: change.ready ? 'KubeletReady' : 'KubeletNotReady',
            message: change.ready ? 'kubelet is posting ready status' : 'kubelet is restarting (in-place upgrade)',
            lastHeartbeatTime: now,
            ...(c.status !== (change.ready ? 'True' : 'False') ? { lastTransitionTime: now } : {}),
          },
    );
    await core.patchNode(
      {
        name: nodeName,
        body: {
          status: {
            conditions,
            ...(change.kubeletVersion
              ? { nodeInfo: { ...node.status?.nodeInfo, kubeletVersion: change.kubeletVersion } }
              : {}),
          },
        },
      },
      mergePatch,
    );
  }
}

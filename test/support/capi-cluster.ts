// What a test of the real-CAPI tier does as a platform engineer would: kubectl
// against the management cluster CAPI runs on, the temporal CLI against the
// extension's dev server, and the extension's own "hook answered" log lines to
// see which hooks CAPI called, in which order. Services: test/support/capi-tier.ts.
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Client, Connection } from '@temporalio/client';
import { requireEnv } from './services.ts';
import { REQUEST_CHECKS_ON_MESSAGE } from '../../src/api/handlers/request-checks.ts';
import { inMemoryCluster, inMemoryClusterClass, upgradeArgs } from '../../src/local/in-memory-samples.ts';

const run = promisify(execFile);

interface CapiState {
  managementKubeconfig: string;
  kubectl: string;
  capiVersion: string;
  manifestsDir: string;
  managers: Record<'capi' | 'cabpk' | 'kcp' | 'capd', { log: string }>;
}

export interface Condition {
  type: string;
  status: string;
  reason?: string;
  message?: string;
}

export interface KubeObject {
  metadata: {
    name: string;
    namespace?: string;
    uid: string;
    generation?: number;
    annotations?: Record<string, string>;
    labels?: Record<string, string>;
    deletionTimestamp?: string;
  };
  spec?: Record<string, unknown>;
  status?: { conditions?: Condition[]; phase?: string; [key: string]: unknown };
}

export interface HookCallLog {
  hook: string;
  subject: string;
  status: string;
  outcome: string;
  message?: string;
  /** The Kubernetes version a lifecycle call is about. */
  version?: string;
  retryAfterSeconds?: number;
  /** When the extension answered (pino's epoch milliseconds). */
  time: number;
  /** Line number in the extension's log: the order calls were answered in. */
  seq: number;
}

export class CapiTierClient {
  readonly state: CapiState;
  readonly extensionName: string;
  private connection?: Promise<Connection>;
  private readonly workloadKubeconfigs = new Map<string, string>();

  constructor() {
    this.state = JSON.parse(readFileSync(requireEnv('CAPI_TIER_STATE'), 'utf8')) as CapiState;
    this.extensionName = requireEnv('CAPI_TIER_EXTENSION_NAME');
  }

  private async exec(label: string, kubeconfig: string, args: string[], stdin?: string): Promise<string> {
    const child = run(this.state.kubectl, ['--kubeconfig', kubeconfig, ...args], { maxBuffer: 64 << 20 });
    if (stdin !== undefined) child.child.stdin?.end(stdin);
    try {
      return (await child).stdout;
    } catch (err) {
      const e = err as { stderr?: string; message: string };
      throw new Error(`${label} ${args.join(' ')}: ${e.stderr?.trim() || e.message}`);
    }
  }

  /** kubectl against the management cluster. */
  async kubectl(args: string[], stdin?: string): Promise<string> {
    return await this.exec('kubectl', this.state.managementKubeconfig, args, stdin);
  }

  /** kubectl against a workload cluster (CAPD in-memory), with the kubeconfig CAPI wrote for it. */
  async workloadKubectl(namespace: string, cluster: string, args: string[]): Promise<string> {
    const key = `${namespace}/${cluster}`;
    let file = this.workloadKubeconfigs.get(key);
    if (!file) {
      const value = await this.kubectl([
        'get',
        'secret',
        '-n',
        namespace,
        `${cluster}-kubeconfig`,
        '-o',
        'jsonpath={.data.value}',
      ]);
      file = join(mkdtempSync(join(tmpdir(), 'capi-tier-wl-')), 'kubeconfig');
      writeFileSync(file, Buffer.from(value, 'base64'), { mode: 0o600 });
      this.workloadKubeconfigs.set(key, file);
    }
    return await this.exec(`kubectl (workload cluster ${key})`, file, args);
  }

  async get<T extends KubeObject>(kind: string, namespace: string, name: string): Promise<T | undefined> {
    const out = await this.kubectl(['get', kind, '-n', namespace, name, '-o', 'json', '--ignore-not-found']);
    return out.trim() ? (JSON.parse(out) as T) : undefined;
  }

  async list<T extends KubeObject>(kind: string, namespace: string, selector?: string): Promise<T[]> {
    const out = await this.kubectl(['get', kind, '-n', namespace, '-o', 'json', ...(selector ? ['-l', selector] : [])]);
    return (JSON.parse(out) as { items: T[] }).items;
  }

  /** A fresh namespace holding the in-memory ClusterClass wired to our GenerateUpgradePlan handler. */
  async newNamespace(prefix: string): Promise<string> {
    const namespace = `${prefix}-${randomBytes(3).toString('hex')}`;
    await this.kubectl(['create', 'namespace', namespace]);
    await this.kubectl(
      ['apply', '-n', namespace, '-f', '-'],
      inMemoryClusterClass(this.state.manifestsDir, this.extensionName),
    );
    return namespace;
  }

  /** Applies one of test/capi's manifests (no placeholders) in `namespace`. */
  async applyManifest(namespace: string, file: string): Promise<void> {
    await this.kubectl(['apply', '-n', namespace, '-f', join(this.state.manifestsDir, file)]);
  }

  async createCluster(opts: {
    namespace: string;
    name: string;
    version: string;
    controlPlaneReplicas?: number;
    workerReplicas?: number;
    annotations?: Record<string, string>;
  }): Promise<void> {
    const manifest = inMemoryCluster(this.state.manifestsDir, {
      ...opts,
      controlPlaneReplicas: opts.controlPlaneReplicas ?? 1,
      workerReplicas: opts.workerReplicas ?? 1,
    });
    await this.kubectl(['apply', '-f', '-'], manifest);
    if (opts.annotations) await this.annotate(opts.namespace, opts.name, opts.annotations);
  }

  async annotate(namespace: string, name: string, annotations: Record<string, string>): Promise<void> {
    await this.kubectl([
      'annotate',
      '--overwrite',
      'cluster',
      '-n',
      namespace,
      name,
      ...Object.entries(annotations).map(([k, v]) => `${k}=${v}`),
    ]);
  }

  async setVersion(namespace: string, name: string, version: string): Promise<void> {
    await this.kubectl(upgradeArgs(namespace, name, version));
  }

  /** Versions CAPI's objects are at: what the upgrade has moved so far. */
  async versions(
    namespace: string,
  ): Promise<{ controlPlane: string[]; machineDeployments: string[]; machines: string[] }> {
    const [kcps, mds, machines] = await Promise.all([
      this.list('kubeadmcontrolplanes.controlplane.cluster.x-k8s.io', namespace),
      this.list('machinedeployments.cluster.x-k8s.io', namespace),
      this.list('machines.cluster.x-k8s.io', namespace),
    ]);
    const spec = (o: KubeObject, path: string[]): string => {
      let v: unknown = o.spec;
      for (const p of path) v = (v as Record<string, unknown> | undefined)?.[p];
      return String(v);
    };
    return {
      controlPlane: kcps.map((o) => spec(o, ['version'])),
      machineDeployments: mds.map((o) => spec(o, ['template', 'spec', 'version'])),
      machines: machines.map((o) => spec(o, ['version'])).sort(),
    };
  }

  async condition(namespace: string, name: string, type: string): Promise<Condition | undefined> {
    const cluster = await this.get('cluster', namespace, name);
    return cluster?.status?.conditions?.find((c) => c.type === type);
  }

  /** Every hook call the extension answered for objects in `namespace`, in order. */
  hookCalls(namespace: string): HookCallLog[] {
    const lines = readFileSync(requireEnv('CAPI_TIER_EXTENSION_LOG'), 'utf8').split('\n');
    const calls: HookCallLog[] = [];
    lines.forEach((line, seq) => {
      if (!line.startsWith('{') || !line.includes('"hook answered"')) return;
      const entry = JSON.parse(line) as Omit<HookCallLog, 'seq'>;
      if (entry.subject?.startsWith(`${namespace}/`)) calls.push({ ...entry, seq });
    });
    return calls;
  }

  /** Requests the extension refused (400, 404, …): CAPI's real requests must never be. */
  rejectedRequests(): string[] {
    return readFileSync(requireEnv('CAPI_TIER_EXTENSION_LOG'), 'utf8')
      .split('\n')
      .filter((line) => line.startsWith('{') && line.includes('"request rejected"'));
  }

  /**
   * Calls refused by their request check (docs/request-checks.md): CAPI's real calls must never be.
   * Throws unless the extension runs with the checks on (this tier is their proof).
   */
  refusedByChecks(): string[] {
    const lines = readFileSync(requireEnv('CAPI_TIER_EXTENSION_LOG'), 'utf8').split('\n');
    if (!lines.some((line) => line.includes(REQUEST_CHECKS_ON_MESSAGE)))
      throw new Error('the extension does not check requests against the management cluster (HOOK_REQUEST_CHECKS)');
    return lines.filter((line) => line.startsWith('{') && line.includes('"request refused by its check"'));
  }

  async temporal(): Promise<Client> {
    this.connection ??= Connection.connect({ address: requireEnv('CAPI_TIER_TEMPORAL_ADDRESS') });
    return new Client({ connection: await this.connection });
  }

  /** `temporal …` against the extension's dev server, as an on-call engineer types it. */
  async temporalCli(args: string[]): Promise<string> {
    const { stdout } = await run(
      process.env.TEMPORAL_CLI ?? 'temporal',
      [...args, '--address', requireEnv('CAPI_TIER_TEMPORAL_ADDRESS')],
      { maxBuffer: 64 << 20 },
    );
    return stdout;
  }

  /** The minor of the CAPI release under test (capi.json's capiVersion, e.g. 14 for v1.14.2). */
  get capiMinor(): number {
    const minor = /^v1\.(\d+)\./.exec(this.state.capiVersion)?.[1];
    if (minor === undefined)
      throw new Error(`capi.json: capiVersion ${this.state.capiVersion} is not v1.<minor>.<patch>`);
    return Number(minor);
  }

  /**
   * Whether CAPI shows a hook's `Failure` answer with `message` for this Cluster. From v1.14 the
   * topology controller copies the message into TopologyReconciled; before, the condition says only
   * "got failure response, please check controller logs for errors" and the core manager logs the
   * message (internal/runtime/client/client.go), which is where an operator on v1.13 reads it.
   */
  showsHookFailure(namespace: string, cluster: string, topology: Condition | undefined, message: string): boolean {
    if (this.capiMinor >= 14) return topology?.message?.includes(message) === true;
    if (topology?.message?.includes('got failure response, please check controller logs for errors') !== true)
      return false;
    // klog's text format quotes the message, escaping its own quotes.
    const logged = `got failure response with message ${message.replaceAll('"', '\\"')}`;
    return readFileSync(this.state.managers.capi.log, 'utf8')
      .split('\n')
      .some((line) => line.includes(logged) && line.includes(`Cluster="${namespace}/${cluster}"`));
  }

  /**
   * Aborts an upgrade as an on-call engineer does (the `temporal` CLI's abort signal), then waits
   * until CAPI's TopologyReconciled names the abort and CAPI has asked again and been refused at
   * least three times. Returns the abort message and the condition.
   */
  async abortUpgrade(opts: {
    namespace: string;
    cluster: string;
    workflowId: string;
    target: string;
    reason: string;
    conditionTimeoutMs: number;
  }): Promise<{ aborted: string; topology: Condition | undefined }> {
    const { namespace, cluster, workflowId, target, reason } = opts;
    await this.temporalCli([
      'workflow',
      'signal',
      '--workflow-id',
      workflowId,
      '--name',
      'abort',
      '--input',
      JSON.stringify({ reason }),
    ]);
    const aborted = `upgrade to ${target} aborted: ${reason}; signal "resume" to continue`;
    const topology = await eventually(
      'TopologyReconciled naming the abort',
      () => this.condition(namespace, cluster, 'TopologyReconciled'),
      (c) => this.showsHookFailure(namespace, cluster, c, aborted),
      opts.conditionTimeoutMs,
    );
    const refused = () =>
      this.hookCalls(namespace).filter((c) => c.status === 'Failure' && c.message === aborted).length;
    await eventually('CAPI asking again after the abort', async () => refused() >= 3, Boolean, 3 * 60_000);
    return { aborted, topology };
  }

  async close(): Promise<void> {
    if (this.connection) await (await this.connection).close();
  }
}

/** Polls `fn` every `intervalMs` until `ok` holds; throws naming `what` and the last value on timeout. */
export async function eventually<T>(
  what: string,
  fn: () => Promise<T>,
  ok: (v: T) => boolean,
  timeoutMs: number,
  intervalMs = 2_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (ok(v)) return v;
    if (Date.now() > deadline)
      throw new Error(`timed out after ${timeoutMs / 1000}s waiting for ${what}; last seen: ${JSON.stringify(v)}`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

/**
 * `hook version` of each call, repeats in a row collapsed: the order in which
 * CAPI moved from one hook to the next (it re-calls a blocking hook until it
 * passes). Only the hooks listed.
 */
export function hookSequence(calls: HookCallLog[], hooks: readonly string[]): string[] {
  const order: string[] = [];
  for (const c of calls) {
    if (!hooks.includes(c.hook)) continue;
    const step = c.version ? `${c.hook} ${c.version}` : c.hook;
    if (order[order.length - 1] !== step) order.push(step);
  }
  return order;
}

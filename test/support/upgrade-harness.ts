// Workflow-tier harness for cluster upgrades: the real HTTPS hook server
// backed by the real Temporal client, a real Worker with stubbed activities
// on a task queue of the test's own, and a CAPI-like poller.
import { randomUUID } from 'node:crypto';
import type { Client } from '@temporalio/client';
import type { NativeConnection, Worker } from '@temporalio/worker';
import { defaultHandlerName, HOOKS_API_VERSION, type HookName } from '../../src/api/hooks/contract.ts';
import { createClusterUpgradeHandlers } from '../../src/api/handlers/lifecycle/cluster-upgrades.ts';
import { requestChecksOff } from '../../src/api/handlers/request-checks.ts';
import type { UpgradeViews } from '../../src/api/handlers/lifecycle/upgrade-views.ts';
import { hookPath } from '../../src/api/hooks/hook-route.ts';
import { CancelledFailure, Context } from '@temporalio/activity';
import type {
  CapacityReadiness,
  ClusterEventInput,
  HealthCheckInput,
  HealthReport,
  UpgradeActivities,
} from '../../src/activities/upgrade-types.ts';
import type { DeprecatedApiScan } from '../../src/domain/deprecated-apis.ts';
import {
  clusterUpgradeWorkflowId,
  type ClusterRef,
  type ClusterUpgradeStatus,
  type ReservedCapacity,
} from '../../src/model/cluster-upgrade.ts';
import type { AlertActivities, AlertCheckInput } from '../../src/activities/alert-types.ts';
import type { DrainSurvey, ReadinessActivities } from '../../src/activities/readiness-types.ts';
import type { AlertReport } from '../../src/model/alerts.ts';
import { expect } from '@jest/globals';
import { callHook } from '../../support/capi-client.ts';
import { cluster } from '../../support/capi-fixtures.ts';
import { startTestHookServer, type TestHookServer } from './hook-server.ts';
import { drainSurvey, readyGates } from './readiness-stubs.ts';
import { createTestWorker, testClient } from './temporal.ts';

export interface StubUpgradeActivities extends UpgradeActivities, AlertActivities, ReadinessActivities {
  /** What the next drain surveys of the readiness re-checks find (default: two nodes, nothing blocking). */
  survey: () => DrainSurvey | Promise<DrainSurvey>;
  /** What the next alert checks report (the alert gate; default: nothing fires). */
  alerts: (input: AlertCheckInput) => AlertReport | Promise<AlertReport>;
  /** What the next health probes report (replace to make checks fail, throw or hang). */
  health: (input: HealthCheckInput) => HealthReport | Promise<HealthReport>;
  /** What the next capacity readiness checks report. */
  capacity: () => CapacityReadiness;
  /** Runs as each Cluster event is recorded (replace to make recording slow or fail). */
  event: (input: ClusterEventInput) => void | Promise<void>;
  /** What the workload API server's deprecated-API metric says (replace to request removed APIs, or throw). */
  deprecatedApis: () => DeprecatedApiScan | Promise<DeprecatedApiScan>;
  calls: {
    health: HealthCheckInput[];
    reserve: number;
    release: number;
    capacity: number;
    cancelled: number;
    /** Events recorded on the Cluster, in order. */
    events: ClusterEventInput[];
    deprecatedApis: number;
    /** Drain surveys of the readiness re-checks. */
    surveys: number;
    alertChecks: number;
    /** Comments of the silences asked for and expired, in order. */
    silencesEnsured: string[];
    silencesExpired: string[];
  };
}

export const healthy = (): HealthReport => ({
  healthy: true,
  summary: 'all checks passed',
  findings: [],
  warnings: [],
});

/** A probe that never answers until the activity is cancelled (heartbeating, as the real ones do). */
export async function hangUntilCancelled(): Promise<never> {
  const ctx = Context.current();
  const beat = setInterval(() => ctx.heartbeat(), 500);
  try {
    await ctx.cancelled;
  } finally {
    clearInterval(beat);
  }
  throw new Error('unreachable');
}

/** The harness's workload cluster (kubelets at the upgrade's from version); `pdbs` hold w-1's drain. */
export const readySurvey = (pdbs: Parameters<typeof drainSurvey>[0] = []) => drainSurvey(pdbs, 'v1.30.5');

export function stubUpgradeActivities(): StubUpgradeActivities {
  const calls = {
    health: [] as HealthCheckInput[],
    reserve: 0,
    release: 0,
    capacity: 0,
    cancelled: 0,
    events: [] as ClusterEventInput[],
    deprecatedApis: 0,
    surveys: 0,
    alertChecks: 0,
    silencesEnsured: [] as string[],
    silencesExpired: [] as string[],
  };
  let reserved: ReservedCapacity[] = [];
  const stub: StubUpgradeActivities = {
    calls,
    health: healthy,
    capacity: () => ({ ready: true, pending: [] }),
    event: () => {},
    deprecatedApis: () => ({ uses: [], malformed: 0, dropped: 0 }),
    survey: () => readySurvey(),
    async readinessTarget() {
      return { version: 'v1.30.5', annotations: {} };
    },
    async surveyDrain(input) {
      calls.surveys++;
      const survey = await stub.survey();
      const gates = survey.gates ?? readyGates(input);
      return { ...survey, ...(gates ? { gates } : {}) };
    },
    async checkDeprecatedApis() {
      calls.deprecatedApis++;
      return await stub.deprecatedApis();
    },
    alerts: () => ({ reachable: true, firing: [], firingCount: 0 }),
    async checkAlerts(input) {
      calls.alertChecks++;
      return await stub.alerts(input);
    },
    async ensureSilence(input) {
      calls.silencesEnsured.push(input.comment);
      return { id: `silence-${calls.silencesEnsured.length}` };
    },
    async expireSilences(input) {
      calls.silencesExpired.push(input.comment);
      return { expired: 1 };
    },
    async checkClusterHealth(input) {
      calls.health.push(input);
      try {
        return await stub.health(input);
      } catch (err) {
        if (err instanceof CancelledFailure) calls.cancelled++;
        throw err;
      }
    },
    async reserveCapacity(input) {
      calls.reserve++;
      reserved = [{ machineDeployment: 'md-0', originalReplicas: 2, reservedReplicas: 2 + input.count }];
      return reserved;
    },
    async checkReservedCapacity() {
      calls.capacity++;
      return stub.capacity();
    },
    async recordClusterEvent(input) {
      calls.events.push(input);
      await stub.event(input);
    },
    async releaseCapacity() {
      calls.release++;
      const was = reserved;
      reserved = [];
      return was;
    },
  };
  return stub;
}

export interface HookAnswer {
  statusCode: number;
  status: 'Success' | 'Failure';
  message?: string;
  retryAfterSeconds: number;
}

export interface UpgradeHarness {
  client: Client;
  taskQueue: string;
  hooks: TestHookServer;
  /** What the hooks answer from (counts describes, Lists and hits). */
  views: UpgradeViews;
  activities: StubUpgradeActivities;
  ref: Required<ClusterRef>;
  /** The workflow id of this harness's cluster upgrade. */
  workflowId: string;
  startWorker(): Promise<void>;
  stopWorker(): Promise<void>;
  /** The upgrade's `status` query. */
  status(): Promise<ClusterUpgradeStatus>;
  call(
    hook: HookName,
    fields: Record<string, unknown>,
    opts?: {
      annotations?: Record<string, string>;
      /** ExtensionConfig spec.settings of this call (instead of the harness's). */
      settings?: Record<string, string>;
      timeout?: string;
      topologyVersion?: string;
      uid?: string;
    },
  ): Promise<HookAnswer>;
  /** Calls like CAPI until the gate opens (retryAfterSeconds 0) or fails; returns the last answer. */
  pollUntilDone(
    hook: HookName,
    fields: Record<string, unknown>,
    opts?: {
      annotations?: Record<string, string>;
      settings?: Record<string, string>;
      timeoutMs?: number;
      topologyVersion?: string;
    },
  ): Promise<HookAnswer>;
  close(): Promise<void>;
}

export async function startUpgradeHarness(
  options: {
    env?: Record<string, string>;
    /** ExtensionConfig spec.settings sent with every hook call. */
    settings?: Record<string, string>;
    /** Real activities in place of stubs (e.g. the alert activities). */ activities?: Partial<AlertActivities>;
    /** Tuning of the api's kept views (e.g. a short maxStaleMs). */
    views?: Parameters<typeof createClusterUpgradeHandlers>[0]['views'];
  } = {},
): Promise<UpgradeHarness> {
  const { client, close: closeClient } = await testClient();
  const taskQueue = `upgrades-${randomUUID()}`;
  const ref = { namespace: `ns-${randomUUID().slice(0, 8)}`, name: 'prod-1', uid: randomUUID() };
  const lifecycle = createClusterUpgradeHandlers({
    client,
    taskQueue,
    checks: requestChecksOff,
    ...(options.views ? { views: options.views } : {}),
  });
  const hooks = await startTestHookServer({
    ...(options.env ? { env: options.env } : {}),
    server: { unavailableRetryAfterSeconds: 15 },
    lifecycle,
  });
  const activities = stubUpgradeActivities();
  let running: { worker: Worker; connection: NativeConnection; done: Promise<void> } | undefined;

  const harness: UpgradeHarness = {
    client,
    taskQueue,
    hooks,
    views: lifecycle.views,
    activities,
    ref,
    workflowId: clusterUpgradeWorkflowId(ref),
    async startWorker() {
      const { worker, connection } = await createTestWorker({
        taskQueue,
        activities: { ...activities, ...options.activities },
      });
      running = { worker, connection, done: worker.run() };
    },
    async status() {
      return (await client.workflow.getHandle(harness.workflowId).query('status')) as ClusterUpgradeStatus;
    },
    async stopWorker() {
      if (!running) return;
      running.worker.shutdown();
      await running.done;
      await running.connection.close();
      running = undefined;
    },
    async call(hook, fields, opts = {}) {
      const c = cluster(ref.name, ref.namespace, opts.topologyVersion ?? 'v1.33.0');
      c.metadata.uid = opts.uid ?? ref.uid;
      if (opts.annotations) c.metadata.annotations = { ...c.metadata.annotations, ...opts.annotations };
      const settings = opts.settings ?? options.settings;
      const body = {
        apiVersion: HOOKS_API_VERSION,
        kind: `${hook}Request`,
        ...(settings ? { settings } : {}),
        cluster: c,
        ...fields,
      };
      const res = await callHook<HookAnswer>(hooks.url, hookPath(hook, defaultHandlerName(hook)), body, {
        ca: hooks.ca.certPem,
        timeout: opts.timeout ?? '10s',
      });
      return { ...res.body, statusCode: res.statusCode };
    },
    async pollUntilDone(hook, fields, opts = {}) {
      const deadline = Date.now() + (opts.timeoutMs ?? 30_000);
      for (;;) {
        const answer = await harness.call(hook, fields, opts);
        if (answer.status === 'Failure' || answer.retryAfterSeconds === 0 || Date.now() > deadline) return answer;
        await new Promise((r) => setTimeout(r, 150));
      }
    },
    async close() {
      await harness.stopWorker();
      await hooks.close();
      lifecycle.views.close();
      await closeClient();
    },
  };
  return harness;
}

export const steps = (...versions: string[]) => versions.map((version) => ({ version }));

// The chained upgrade v1.30.5 → v1.33.0 the workflow tests drive.
const FROM = 'v1.30.5';
const TARGET = 'v1.33.0';
const CP_PLAN = ['v1.31.14', 'v1.32.13', 'v1.33.0'];

export const beforeClusterUpgrade = (to = TARGET) => ({
  fromKubernetesVersion: FROM,
  toKubernetesVersion: to,
  controlPlaneUpgrades: steps(...CP_PLAN),
  workersUpgrades: steps(TARGET),
});

/** Drives a whole chained upgrade the way CAPI's topology controller sequences its hook calls. */
export async function driveChainedUpgrade(h: UpgradeHarness, annotations: Record<string, string> = {}): Promise<void> {
  const opts = { annotations };
  expect(await h.pollUntilDone('BeforeClusterUpgrade', beforeClusterUpgrade(), opts)).toMatchObject({
    status: 'Success',
    retryAfterSeconds: 0,
  });
  let current = FROM;
  for (let i = 0; i < CP_PLAN.length; i++) {
    const next = CP_PLAN[i] as string;
    const remaining = steps(...CP_PLAN.slice(i));
    expect(
      await h.pollUntilDone(
        'BeforeControlPlaneUpgrade',
        {
          fromKubernetesVersion: current,
          toKubernetesVersion: next,
          controlPlaneUpgrades: remaining,
          workersUpgrades: steps(TARGET),
        },
        opts,
      ),
    ).toMatchObject({ status: 'Success', retryAfterSeconds: 0 });
    expect(
      await h.pollUntilDone(
        'AfterControlPlaneUpgrade',
        {
          kubernetesVersion: next,
          controlPlaneUpgrades: steps(...CP_PLAN.slice(i + 1)),
          workersUpgrades: steps(TARGET),
        },
        opts,
      ),
    ).toMatchObject({ status: 'Success', retryAfterSeconds: 0 });
    current = next;
  }
  expect(
    await h.pollUntilDone(
      'BeforeWorkersUpgrade',
      { fromKubernetesVersion: FROM, toKubernetesVersion: TARGET, workersUpgrades: steps(TARGET) },
      opts,
    ),
  ).toMatchObject({
    status: 'Success',
    retryAfterSeconds: 0,
  });
  expect(await h.pollUntilDone('AfterWorkersUpgrade', { kubernetesVersion: TARGET }, opts)).toMatchObject({
    status: 'Success',
    retryAfterSeconds: 0,
  });
  expect(await h.pollUntilDone('AfterClusterUpgrade', { kubernetesVersion: TARGET }, opts)).toMatchObject({
    status: 'Success',
    retryAfterSeconds: 0,
  });
}

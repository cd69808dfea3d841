// The readiness workflow on the real dev server with its activities stubbed: it runs every check,
// turns a failed read into Unknown without losing the other checks, and `capi-upgrades readiness`
// starts it and prints the table, exiting 1 when a check is Blocked. The activities themselves run
// against the real API server in test/integration/readiness.test.ts.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { Client } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import type { ReadinessActivities } from '../../src/activities/readiness-types.ts';
import type { UpgradeActivities } from '../../src/activities/upgrade-types.ts';
import { READINESS_CHECKS, type ReadinessReport } from '../../src/domain/readiness.ts';
import { readinessWorkflowId, type ReadinessInput } from '../../src/model/readiness.ts';
import { workflowTypes } from '../../src/model/workflow-types.ts';
import { readinessReportQuery } from '../../src/workflows/messages.ts';
import { capiUpgrades } from '../support/cli.ts';
import { drainSurvey, PDB_HOLD, readyGates } from '../support/readiness-stubs.ts';
import { startTestWorker, testClient, uniqueTaskQueue } from '../support/temporal.ts';

type Stubbed = ReadinessActivities & Pick<UpgradeActivities, 'checkDeprecatedApis' | 'checkClusterHealth'>;

const survey = (pdbs: Parameters<typeof drainSurvey>[0] = []) => drainSurvey(pdbs);
const HOLD = PDB_HOLD;

describe('readinessWorkflow', () => {
  let client: Client;
  let close: () => Promise<void>;
  let stop: () => Promise<void>;
  const taskQueue = uniqueTaskQueue('readiness');
  // What the stubs answer, set per test.
  const stub = {
    survey: survey(),
    metricsFail: false,
    target: 'v1.33.0' as string | undefined,
    missing: false,
    annotations: {} as Record<string, string>,
    /** /metrics reports a client of an API that v1.35 no longer serves. */
    removedApiUse: false,
  };
  const activities: Stubbed = {
    readinessTarget: async ({ cluster }) => {
      if (stub.missing || cluster.name.startsWith('gone-'))
        throw ApplicationFailure.nonRetryable(
          `Cluster ${cluster.namespace}/${cluster.name} not found`,
          'ClusterNotFound',
        );
      return { annotations: stub.annotations, ...(stub.target ? { version: stub.target } : {}) };
    },
    surveyDrain: async (input) => {
      // The fleet test's clusters named `held-…` have the PDB that holds the drain.
      const base = input.cluster.name.startsWith('held-') ? survey([HOLD]) : stub.survey;
      return { ...base, ...(base.gates ? {} : { gates: readyGates(input) }) };
    },
    checkDeprecatedApis: async () => {
      if (stub.metricsFail)
        throw ApplicationFailure.nonRetryable('GET /metrics: 403 Forbidden', 'WorkloadMetricsRefused');
      const use = {
        group: 'example.io',
        version: 'v1beta1',
        resource: 'widgets',
        subresource: '',
        removedRelease: '1.35',
      };
      return { uses: stub.removedApiUse ? [use] : [], malformed: 0, dropped: 0 };
    },
    checkClusterHealth: async () => ({ healthy: true, summary: '2 of 2 nodes Ready', findings: [], warnings: [] }),
  };

  beforeAll(async () => {
    ({ client, close } = await testClient());
    ({ stop } = await startTestWorker({ taskQueue, activities }));
  });
  afterAll(async () => {
    await stop();
    await close();
  });

  const run = async (name: string, settings?: Record<string, string>): Promise<ReadinessReport> => {
    const input: ReadinessInput = {
      cluster: { namespace: 'fleet', name },
      targetVersion: 'v1.35.0',
      ...(settings ? { settings } : {}),
    };
    const handle = await client.workflow.start(workflowTypes.readiness, {
      taskQueue,
      workflowId: `${readinessWorkflowId(input.cluster, input.targetVersion)}/${taskQueue}`,
      args: [input],
    });
    const report = (await handle.result()) as ReadinessReport;
    // Every check answered (a report read mid-run shows the rest as Unknown, "not checked yet").
    expect(report.checks.map((c) => c.check)).toEqual([...READINESS_CHECKS]);
    expect(report.checks.map((c) => c.message)).not.toContain('not checked yet');
    // The query answers the same report once the run is done (the Web UI's Queries tab).
    expect(await handle.query(readinessReportQuery)).toEqual(report);
    return report;
  };

  it('runs every check in order; a PDB that would hold the drain makes it Blocked', async () => {
    Object.assign(stub, { survey: survey([HOLD]), metricsFail: false, target: 'v1.33.0' });
    const report = await run('blocked');
    expect(report.verdict).toBe('Blocked');
    expect(report.fromVersion).toBe('v1.33.0');
    expect(report.checks.map((c) => [c.check, c.verdict])).toEqual([
      ['plan', 'Ready'],
      ['removed-apis', 'Ready'],
      ['drain', 'Blocked'],
      ['capacity', 'Ready'],
      ['in-place', 'Ready'],
      ['version-skew', 'Ready'],
      ['health', 'Ready'],
      ['alerts', 'Ready'],
      ['calendar', 'Ready'],
    ]);
    expect(report.checks[2]?.message).toContain(
      'node w-1: PodDisruptionBudget shop/web (minAvailable 2 with 2 healthy: evicting one leaves 1) covers shop/web-a, shop/web-b',
    );
  });

  it('a read that fails makes its check Unknown and keeps the others', async () => {
    Object.assign(stub, { survey: survey(), metricsFail: true, target: 'v1.33.0' });
    const report = await run('unknown');
    expect(report.verdict).toBe('Unknown');
    expect(report.checks.find((c) => c.check === 'removed-apis')).toEqual({
      check: 'removed-apis',
      verdict: 'Unknown',
      message: "could not read the workload API server's /metrics: GET /metrics: 403 Forbidden",
    });
    expect(report.checks.filter((c) => c.verdict === 'Ready')).toHaveLength(READINESS_CHECKS.length - 1);
  });

  it('a Cluster without a topology version leaves the plan Unknown, saying why', async () => {
    Object.assign(stub, { survey: survey(), metricsFail: false, target: undefined });
    const report = await run('no-topology');
    expect(report.checks.find((c) => c.check === 'plan')).toEqual({
      check: 'plan',
      verdict: 'Unknown',
      message: 'the Cluster has no spec.topology.version to plan from',
    });
  });

  it('a missing Cluster or a refused policy makes every check Unknown, saying why, and the run still reports', async () => {
    Object.assign(stub, { survey: survey(), metricsFail: false, target: 'v1.33.0', missing: true });
    const missing = await run('missing');
    expect(missing.verdict).toBe('Unknown');
    expect(new Set(missing.checks.map((c) => c.message))).toEqual(
      new Set(['could not read the Cluster: Cluster fleet/missing not found']),
    );
    expect(missing.checks).toHaveLength(READINESS_CHECKS.length);

    Object.assign(stub, { missing: false, annotations: { 'upgrades.capi-orchestrator.io/upgrade-at': 'tomorrow' } });
    const refused = await run('refused');
    expect(refused.checks).toHaveLength(READINESS_CHECKS.length);
    expect(refused.checks.every((c) => c.verdict === 'Unknown')).toBe(true);
    expect(refused.checks[0]?.message).toMatch(
      /^the upgrade policy is refused: .*upgrade-at.*\(fix that setting or annotation\)$/,
    );
    stub.annotations = {};
  });

  it("says what the gate will do under the Cluster's granted gate override: Ready, naming the override", async () => {
    Object.assign(stub, { survey: survey(), metricsFail: false, target: 'v1.33.0', removedApiUse: true });
    // removedApiPolicy fail: the gate would fail the upgrade on it.
    const held = await run('removed-api', { removedApiPolicy: 'fail' });
    expect(held.verdict).toBe('Blocked');
    expect(held.checks.find((c) => c.check === 'removed-apis')?.message).toContain('example.io/v1beta1 widgets');

    stub.annotations = {
      'upgrades.capi-orchestrator.io/override-gates': 'removed-apis',
      'upgrades.capi-orchestrator.io/override-reason': 'the widget client moves next week',
    };
    const overridden = await run('removed-api-overridden', {
      removedApiPolicy: 'fail',
      gateOverrideNamespaces: 'fleet',
    });
    expect(overridden.verdict).toBe('Ready');
    const check = overridden.checks.find((c) => c.check === 'removed-apis');
    expect(check?.verdict).toBe('Ready');
    expect(check?.message).toMatch(
      /^overridden: .*example\.io\/v1beta1 widgets.*; gate removed-apis overridden \(upgrades\.capi-orchestrator\.io\/override-gates, granted by setting gateOverrideNamespaces\): the widget client moves next week$/,
    );
    Object.assign(stub, { annotations: {}, removedApiUse: false });
  });

  it('capi-upgrades readiness prints the table and exits 1 when Blocked, 0 when Ready', async () => {
    const cli = (...args: string[]) => capiUpgrades(args, { TEMPORAL_TASK_QUEUE: taskQueue });
    Object.assign(stub, { survey: survey([HOLD]), metricsFail: false, target: 'v1.33.0' });
    const blocked = await cli('readiness', 'fleet/cli-1', '--to', 'v1.35.0');
    expect(blocked.code).toBe(1);
    expect(blocked.stdout).toContain('cluster:   fleet/cli-1\nupgrade:   v1.33.0 → v1.35.0\nverdict:   Blocked\n');
    expect(blocked.stdout).toMatch(/^CHECK\s+VERDICT\s+MESSAGE$/m);
    expect(blocked.stdout).toMatch(/^drain\s+Blocked\s+node w-1: PodDisruptionBudget shop\/web /m);

    Object.assign(stub, { survey: survey() });
    const ready = await cli('readiness', 'fleet/cli-2', '--to', 'v1.35.0', '-o', 'json');
    expect(ready.code).toBe(0);
    expect((JSON.parse(ready.stdout) as ReadinessReport).verdict).toBe('Ready');

    expect(await cli('readiness', 'fleet/cli-3')).toMatchObject({ code: 2 });
    expect(await cli('readiness', 'fleet/cli-3', '--to', 'latest')).toMatchObject({
      code: 2,
      stderr: 'capi-upgrades: readiness: --to "latest" is not a Kubernetes version\n',
    });
  });

  it('capi-upgrades readiness with several clusters runs one readiness run each and ranks them', async () => {
    const cli = (...args: string[]) => capiUpgrades(args, { TEMPORAL_TASK_QUEUE: taskQueue });
    Object.assign(stub, { survey: survey(), metricsFail: false, target: 'v1.33.0', missing: false });
    const clusters = ['fleet/ok-1', 'fleet/held-1', 'fleet/gone-1', 'fleet/ok-2'];
    const out = await cli('readiness', ...clusters, '--to', 'v1.35.0', '--max-concurrent', '2');
    expect(out.code).toBe(1);
    const lines = out.stdout.trimEnd().split('\n');
    expect(lines[0]).toBe('4 clusters: 1 Blocked, 1 Unknown, 2 Ready');
    expect(lines[2]).toMatch(/^CLUSTER\s+VERDICT\s+UPGRADE\s+CHECK\s+MESSAGE$/);
    expect(lines.slice(3).map((l) => l.split(/\s+/).slice(0, 2))).toEqual([
      ['fleet/held-1', 'Blocked'],
      ['fleet/gone-1', 'Unknown'],
      ['fleet/ok-1', 'Ready'],
      ['fleet/ok-2', 'Ready'],
    ]);
    expect(lines[3]).toMatch(
      /^fleet\/held-1\s+Blocked\s+v1\.33\.0 → v1\.35\.0\s+drain\s+node w-1: PodDisruptionBudget shop\/web /,
    );
    expect(lines[4]).toContain('Cluster fleet/gone-1 not found');
    // Each cluster has its own readiness run, as the single form starts it (the Web UI lists them).
    for (const c of clusters) {
      const [namespace, name] = c.split('/') as [string, string];
      const d = await client.workflow.getHandle(readinessWorkflowId({ namespace, name }, 'v1.35.0')).describe();
      expect(d.type).toBe(workflowTypes.readiness);
    }

    const json = await cli('readiness', 'fleet/ok-1', 'fleet/ok-2', '--to', 'v1.35.0', '-o', 'json');
    expect(json.code).toBe(0);
    expect((JSON.parse(json.stdout) as { cluster: string; verdict: string }[]).map((r) => r.verdict)).toEqual([
      'Ready',
      'Ready',
    ]);
    expect(await cli('readiness', '--all', 'fleet/ok-1', '--to', 'v1.35.0')).toMatchObject({
      code: 2,
      stderr: 'capi-upgrades: readiness: either --all or the clusters to check, not both\n',
    });
    expect(await cli('readiness', '--all', '--to', 'v1.35.0', '--max-concurrent', '0')).toMatchObject({ code: 2 });
  });
});

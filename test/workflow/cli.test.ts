// The operator CLI (`capi-upgrades`, src/cli) as an operator runs it: a child
// process with the TEMPORAL_* settings, against an upgrade CAPI drives through
// the hooks on the real dev server (activities stubbed).
import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import type { UpgradeReport, UpgradeRow } from '../../src/cli/operations.ts';
import { capiUpgrades } from '../support/cli.ts';
import {
  beforeClusterUpgrade,
  hangUntilCancelled,
  healthy,
  startUpgradeHarness,
  type UpgradeHarness,
} from '../support/upgrade-harness.ts';
import { waitFor } from '../support/wait.ts';

const cli = (...args: string[]) => capiUpgrades(args);

describe('capi-upgrades', () => {
  let h: UpgradeHarness;
  let key: string;
  beforeEach(async () => {
    h = await startUpgradeHarness();
    await h.startWorker();
    key = `${h.ref.namespace}/${h.ref.name}`;
  });
  afterEach(async () => h.close());

  it('lists, shows, aborts and resumes an upgrade by cluster name', async () => {
    // The pre-upgrade health check hangs: the first step waits.
    h.activities.health = () => hangUntilCancelled();
    await waitFor(
      () => h.call('BeforeClusterUpgrade', beforeClusterUpgrade()),
      (a) => a.message?.includes('running the pre-upgrade health check') ?? false,
    );

    const listed = await waitFor(
      async () => JSON.parse((await cli('list', '--namespace', h.ref.namespace, '-o', 'json')).stdout) as UpgradeRow[],
      (rows) => rows.length === 1 && rows[0]?.phase === 'Upgrading',
      10_000,
    );
    expect(listed).toEqual([
      expect.objectContaining({
        cluster: key,
        targetVersion: 'v1.33.0',
        phase: 'Upgrading',
        status: 'RUNNING',
        workflowId: h.workflowId,
      }),
    ]);
    const text = await cli('list', '--namespace', h.ref.namespace);
    expect(text.stdout).toMatch(/^CLUSTER\s+TARGETVERSION\s+PHASE\s+STATUS/);
    expect(text.stdout).toContain(h.workflowId);

    const status = JSON.parse((await cli('status', key, '-o', 'json')).stdout) as UpgradeReport;
    expect(status.status?.phase).toBe('Upgrading');
    expect(status.status?.gates['BeforeClusterUpgrade@v1.33.0']).toMatchObject({
      state: 'Waiting',
      message: 'BeforeClusterUpgrade v1.33.0: running the pre-upgrade health check',
    });
    const shown = (await cli('status', key)).stdout;
    expect(shown).toContain(`cluster:   ${key}`);
    expect(shown).toMatch(
      /BeforeClusterUpgrade@v1\.33\.0\s+Waiting\s+BeforeClusterUpgrade v1\.33\.0: running the pre-upgrade health check/,
    );

    // Nothing to resume while it runs: refused (it used to say "resume sent" for a signal the workflow ignores).
    expect(await cli('resume', key)).toMatchObject({
      code: 2,
      stderr: `capi-upgrades: the upgrade of ${key} is Upgrading: resume only continues an aborted or failed upgrade\n`,
    });
    expect(await cli('abort', key, '--reason', 'change freeze')).toMatchObject({
      code: 0,
      stdout: `abort sent to ${h.workflowId}\n`,
    });
    const aborted = await waitFor(
      () => h.call('BeforeClusterUpgrade', beforeClusterUpgrade()),
      (a) => a.status === 'Failure',
      10_000,
    );
    expect(aborted.message).toBe('upgrade to v1.33.0 aborted: change freeze; signal "resume" to continue');
    expect((await cli('list', '--phase', 'Aborted', '-o', 'json')).stdout).toContain(h.workflowId);
    // retry runs a failed step again and cannot undo an abort: refused, naming resume (it used to say "retry sent").
    expect(await cli('retry', key)).toMatchObject({
      code: 2,
      stdout: '',
      stderr: `capi-upgrades: the upgrade of ${key} is Aborted: retry only runs a failed step again and cannot undo an abort; to continue: capi-upgrades resume ${key}\n`,
    });

    h.activities.health = healthy;
    expect((await cli('resume', key)).code).toBe(0);
    await waitFor(
      async () => (JSON.parse((await cli('status', key, '-o', 'json')).stdout) as UpgradeReport).status?.phase,
      (p) => p === 'Upgrading',
      10_000,
    );
    const history = JSON.parse((await cli('history', key, '-o', 'json')).stdout) as UpgradeRow[];
    expect(history.map((r) => r.workflowId)).toEqual([h.workflowId]);
  });

  it('status names the gate that holds: the maintenance window, then removed-apis, and the override', async () => {
    const P = 'upgrades.capi-orchestrator.io/';
    const day = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'][(new Date().getUTCDay() + 3) % 7] ?? 'Sun';
    const flowschemas = {
      group: 'flowcontrol.apiserver.k8s.io',
      version: 'v1beta3',
      resource: 'flowschemas',
      subresource: '',
      removedRelease: '1.32',
    };
    h.activities.deprecatedApis = () => ({ uses: [flowschemas], malformed: 0, dropped: 0 });
    const annotations: Record<string, string> = {
      [`${P}maintenance-window`]: `${day} 02:00 1h`,
      [`${P}removed-api-policy`]: 'fail',
    };
    await waitFor(
      () => h.call('BeforeClusterUpgrade', beforeClusterUpgrade(), { annotations }),
      (a) => a.message?.includes('waiting for the maintenance window') ?? false,
    );
    expect((await cli('status', key)).stdout).toMatch(/^held by: {3}maintenance-window: closed; next opening \S+Z$/m);

    annotations[`${P}override-gates`] = 'maintenance-window';
    annotations[`${P}override-reason`] = 'security fix CHG-7';
    const settings = { gateOverrideNamespaces: h.ref.namespace };
    await waitFor(
      () => h.call('BeforeClusterUpgrade', beforeClusterUpgrade(), { annotations, settings }),
      (a) => a.status === 'Failure',
    );
    const shown = (await cli('status', key)).stdout;
    expect(shown).toContain(
      'held by:   removed-apis: clients of the workload cluster requested APIs the upgrade to v1.33.0 removes: ' +
        'flowcontrol.apiserver.k8s.io/v1beta3 flowschemas (removed in 1.32, reached at v1.32.13)\n',
    );
    expect(shown).toMatch(
      /^override: {2}maintenance-window at BeforeClusterUpgrade v1\.33\.0 \(\S+, granted by setting gateOverrideNamespaces\): security fix CHG-7$/m,
    );
    expect(shown).not.toContain('held by:   maintenance-window');
  });

  it('says what is wrong with a bad argument or an unknown cluster, exit code 2', async () => {
    expect(await cli('status', 'not-a-key')).toMatchObject({
      code: 2,
      stderr: 'capi-upgrades: expected <namespace>/<cluster>, got "not-a-key"\n',
    });
    expect(await cli('list', '--phase', 'Done')).toMatchObject({
      code: 2,
      stderr: expect.stringContaining('--phase Done: expected one of Pending') as unknown,
    });
    expect(await cli('abort', 'nowhere/nothing')).toMatchObject({
      code: 2,
      stderr: 'capi-upgrades: no upgrade found for cluster nowhere/nothing\n',
    });
    expect(await cli('frobnicate')).toMatchObject({ code: 2, stderr: 'capi-upgrades: unknown command "frobnicate"\n' });
  });
});

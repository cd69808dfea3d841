// The readiness verdicts of the gates the workload survey reads with their own readers: the
// capacity reservation, node agents / node upgraders for in-place updates, and firing alerts.
// Each says what the gate would do now, naming the object and the fix.
import { describe, expect, it } from '@jest/globals';
import {
  alertsCheck,
  capacityCheck,
  inPlaceCheck,
  withGateOverrides,
  type InPlaceSurvey,
} from '../../src/domain/readiness-gates.ts';
import type { ReadinessCheck } from '../../src/domain/readiness.ts';

describe('capacityCheck', () => {
  const entries = [
    { machineDeployment: 'md-0', originalReplicas: 3, reservedReplicas: 4 },
    { machineDeployment: 'md-1', originalReplicas: 2, reservedReplicas: 3 },
  ];

  it('is Ready saying there is nothing to reserve when capacityReservation is 0', () => {
    expect(capacityCheck(0, undefined)).toEqual({
      check: 'capacity',
      verdict: 'Ready',
      message: "no capacity reservation (capacityReservation 0): the workers roll with each MachineDeployment's surge",
    });
  });

  it('is Ready naming what it would reserve when every machine is Ready', () => {
    const c = capacityCheck(1, { recorded: false, entries, notReady: [] });
    expect(c.verdict).toBe('Ready');
    expect(c.message).toBe('would reserve md-0 3→4, md-1 2→3 (capacityReservation 1); every machine is Ready now');
    expect(capacityCheck(1, { recorded: true, entries, notReady: [] }).message).toMatch(/^reserved already md-0 3→4/);
    expect(capacityCheck(2, { recorded: false, entries: [], notReady: [] }).message).toBe(
      'capacityReservation 2: nothing to reserve (no MachineDeployment with replicas)',
    );
  });

  it('is Blocked naming the MachineDeployment whose machines are not all Ready (the step waits for every one)', () => {
    const c = capacityCheck(1, {
      recorded: false,
      entries,
      notReady: ['MachineDeployment md-0-abcde: 2 of 3 machines Ready'],
    });
    expect(c.verdict).toBe('Blocked');
    expect(c.message).toBe(
      'would reserve md-0 3→4, md-1 2→3, and waits for every machine Ready: MachineDeployment md-0-abcde: 2 of 3 machines Ready (fix or replace the machines that are not Ready)',
    );
  });

  it('is Blocked on a reservation record the step cannot read, and Unknown when nothing was read', () => {
    const c = capacityCheck(1, {
      invalidRecord: 'Cluster fleet/a: annotation x is not a capacity record (3 characters)',
    });
    expect(c.verdict).toBe('Blocked');
    expect(c.message).toMatch(/^Cluster fleet\/a: annotation x is not a capacity record .*remove the annotation/);
    expect(capacityCheck(1, undefined).verdict).toBe('Unknown');
  });
});

describe('inPlaceCheck', () => {
  const survey = (s: Partial<InPlaceSurvey>): InPlaceSurvey => ({
    enabled: true,
    executor: 'delegate',
    checked: 2,
    missing: [],
    unreadable: [],
    ...s,
  });

  it('is Ready without anything to check when in place is off or the job executor applies it', () => {
    expect(inPlaceCheck(survey({ enabled: false })).message).toBe(
      'in-place updates are off (inPlaceUpdates false): Cluster API rolls the machines out',
    );
    expect(inPlaceCheck(survey({ executor: 'job' }))).toEqual({
      check: 'in-place',
      verdict: 'Ready',
      message: 'nodeUpgradeExecutor job: a Job updates each node in place; no node agent to check',
    });
  });

  it('is Ready when an agent serves every node, or an upgrader every kind', () => {
    expect(inPlaceCheck(survey({}))).toEqual({
      check: 'in-place',
      verdict: 'Ready',
      message: 'nodeUpgradeExecutor delegate: node agents serve every node (2)',
    });
    expect(inPlaceCheck(survey({ executor: 'management', checked: 1 })).message).toBe(
      'nodeUpgradeExecutor management: node upgraders serve every infrastructure kind (1)',
    );
  });

  it('warns (Ready, as the hooks roll those machines out instead) naming the node and its Lease', () => {
    const c = inPlaceCheck(
      survey({ missing: ['no node agent serves node w-1 (no fresh Lease kube-system/node-upgrade-agent-w-1)'] }),
    );
    expect(c.verdict).toBe('Ready');
    expect(c.message).toBe(
      'warns: no node agent serves node w-1 (no fresh Lease kube-system/node-upgrade-agent-w-1): Cluster API rolls those machines out instead (start the node agent on those nodes to update them in place)',
    );
  });

  it('is Unknown when a Lease could not be read', () => {
    const c = inPlaceCheck(survey({ unreadable: ['cannot check for a node agent in cluster fleet/a (timeout)'] }));
    expect(c).toEqual({
      check: 'in-place',
      verdict: 'Unknown',
      message: 'cannot check for a node agent in cluster fleet/a (timeout)',
    });
  });
});

describe('alertsCheck', () => {
  it('is Ready saying so when no alert gate is configured', () => {
    expect(alertsCheck('v1.35.0', undefined)).toEqual({
      check: 'alerts',
      verdict: 'Ready',
      message: 'no alert gate configured (alertPrometheusUrl is not set)',
    });
  });

  it('is Ready when nothing that holds fires, Blocked naming the firing alerts in the gate’s words', () => {
    expect(alertsCheck('v1.35.0', { reachable: true, firing: [], firingCount: 0 }).verdict).toBe('Ready');
    const c = alertsCheck('v1.35.0', { reachable: true, firing: ['KubeNodeNotReady'], firingCount: 1 });
    expect(c.verdict).toBe('Blocked');
    expect(c.message).toBe(
      'upgrade to v1.35.0 held: alert KubeNodeNotReady firing in prometheus (gate alerts) (resolve or silence them, or list them in alertIgnore)',
    );
  });

  it('is Unknown when the alert source cannot be read (the gate would hold meanwhile)', () => {
    const c = alertsCheck('v1.35.0', { reachable: false, cause: 'HTTP 503' });
    expect(c.verdict).toBe('Unknown');
    expect(c.message).toBe(
      'upgrade to v1.35.0 held: the alert source prometheus is unreachable: HTTP 503 (gate alerts): the gate would hold the upgrade while it cannot read it',
    );
  });
});

describe('withGateOverrides', () => {
  const checks: ReadinessCheck[] = [
    { check: 'removed-apis', verdict: 'Blocked', message: 'flowcontrol v1beta3 is removed in v1.32' },
    { check: 'drain', verdict: 'Blocked', message: 'node w-1: PodDisruptionBudget shop/web' },
    { check: 'health', verdict: 'Blocked', message: '1 of 2 nodes Ready' },
    { check: 'alerts', verdict: 'Unknown', message: 'cannot read prometheus' },
    { check: 'calendar', verdict: 'Ready', message: 'can start now: no upgradeAt ahead' },
  ];
  const GRANT = 'granted by setting gateOverrideNamespaces';

  it('turns an overridden gate Ready, keeping what it found and naming the override as the gate records it', () => {
    const out = withGateOverrides(checks, {
      gates: ['alerts', 'maintenance-window', 'removed-apis'],
      reason: 'CVE fix tonight',
      grantedBy: 'setting gateOverrideNamespaces',
    });
    expect(out).toEqual([
      {
        check: 'removed-apis',
        verdict: 'Ready',
        message: `overridden: flowcontrol v1beta3 is removed in v1.32; gate removed-apis overridden (upgrades.capi-orchestrator.io/override-gates, ${GRANT}): CVE fix tonight`,
      },
      // Not gates an override lifts: unchanged.
      checks[1],
      checks[2],
      {
        check: 'alerts',
        verdict: 'Ready',
        message: `overridden: cannot read prometheus; gate alerts overridden (upgrades.capi-orchestrator.io/override-gates, ${GRANT}): CVE fix tonight`,
      },
      {
        check: 'calendar',
        verdict: 'Ready',
        message: `can start now: no upgradeAt ahead; gate maintenance-window overridden (upgrades.capi-orchestrator.io/override-gates, ${GRANT}): CVE fix tonight`,
      },
    ]);
  });

  it('leaves every check as it was without an override, or for the gates it does not name', () => {
    expect(withGateOverrides(checks, undefined)).toEqual(checks);
    const out = withGateOverrides(checks, { gates: ['alerts'], reason: 'r' });
    expect(out.filter((c, i) => c !== checks[i]).map((c) => c.check)).toEqual(['alerts']);
  });
});

// The health verdict as a pure function of a cluster state (the activity that reads the state
// runs against the test bed in test/integration/upgrade-activities.test.ts).
import { describe, expect, it } from '@jest/globals';
import type { V1Node, V1NodeSystemInfo, V1Pod, V1PodDisruptionBudget } from '@kubernetes/client-node';
import {
  evaluateHealth,
  invalidHealthCheck,
  kubeletMatches,
  pdbSelectorMatches,
  type ClusterState,
  type HealthCriteria,
} from '../../src/domain/cluster-health.ts';

function node(name: string, kubelet: string, ready = 'True', controlPlane = false): V1Node {
  return {
    metadata: { name, labels: controlPlane ? { 'node-role.kubernetes.io/control-plane': '' } : {} },
    status: {
      conditions: [{ type: 'Ready', status: ready }],
      nodeInfo: { kubeletVersion: kubelet } as V1NodeSystemInfo,
    },
  };
}

function pod(namespace: string, name: string, nodeName: string, phase = 'Running', ready = true): V1Pod {
  return {
    metadata: { namespace, name, labels: { app: name.split('-')[0] ?? '' } },
    spec: { nodeName, containers: [] },
    status: { phase, conditions: [{ type: 'Ready', status: ready ? 'True' : 'False' }] },
  };
}

function pdb(namespace: string, name: string, app: string, disruptionsAllowed: number): V1PodDisruptionBudget {
  return {
    metadata: { namespace, name },
    spec: { selector: { matchLabels: { app } } },
    status: { disruptionsAllowed, currentHealthy: 1, desiredHealthy: 1, expectedPods: 1 },
  };
}

const criteria = (scope: HealthCriteria['scope'], extra: Partial<HealthCriteria> = {}): HealthCriteria => ({
  scope,
  criticalNamespaces: ['kube-system'],
  blockingPdbPolicy: 'fail',
  ...extra,
});

const state: ClusterState = {
  machines: [
    { name: 'm-cp', controlPlane: true, nodeName: 'cp-1' },
    { name: 'm-w1', controlPlane: false, nodeName: 'w-1' },
    { name: 'm-w2', controlPlane: false, nodeName: 'w-2' },
    { name: 'm-new', controlPlane: false },
  ],
  nodes: [node('cp-1', 'v1.32.4'), node('w-1', 'v1.31.14'), node('w-2', 'v1.32.4', 'False'), node('stray', 'v1')],
  pods: [
    pod('kube-system', 'dns-1', 'w-1'),
    pod('kube-system', 'proxy-1', 'w-2', 'Pending'),
    pod('app', 'db-1', 'w-1'),
  ],
  pdbs: [pdb('app', 'db', 'db', 0), pdb('app', 'web', 'web', 0)],
};

describe('evaluateHealth', () => {
  it('checks the nodes the Machines name, in scope, at the version', () => {
    expect(evaluateHealth(criteria('workers', { version: '1.32.4' }), state)).toEqual({
      healthy: false,
      summary:
        '0 of 3 worker nodes Ready at v1.32.4 (Machine m-new: no node yet, w-1: kubelet v1.31.14, w-2: NotReady)',
      findings: ['Machine m-new: no node yet', 'node w-1: kubelet v1.31.14, want v1.32.4', 'node w-2: NotReady'],
      warnings: [],
    });
    expect(evaluateHealth(criteria('control-plane', { version: 'v1.32.4' }), state)).toMatchObject({
      healthy: true,
      summary: '1 of 1 control-plane nodes Ready at v1.32.4',
    });
  });

  it('before the upgrade: critical pods, and PodDisruptionBudgets that block a drain of a checked node', () => {
    const report = evaluateHealth(criteria('pre'), state);
    expect(report.summary).toBe(
      '2 of 3 nodes Ready (w-2: NotReady); 1 of 2 critical pods Ready (kube-system/proxy-1: Pending); ' +
        '1 PodDisruptionBudget blocks drains (app/db)',
    );
    expect(report.findings).toContain('PodDisruptionBudget app/db allows no disruptions (covers 1 pod)');
    expect(report.warnings).toEqual(['Machine m-new: no node yet']);
    const warned = evaluateHealth(criteria('pre', { blockingPdbPolicy: 'warn' }), state);
    expect(warned.warnings).toContain('PodDisruptionBudget app/db allows no disruptions (covers 1 pod)');
  });

  it('is deterministic whatever the order of the state', () => {
    const shuffled: ClusterState = {
      machines: [...state.machines].reverse(),
      nodes: [...state.nodes].reverse(),
      pods: [...state.pods].reverse(),
      pdbs: [...state.pdbs].reverse(),
    };
    for (const scope of ['pre', 'workers', 'post'] as const) {
      const c = criteria(scope, scope === 'pre' ? {} : { version: 'v1.32.4' });
      expect(evaluateHealth(c, shuffled)).toEqual(evaluateHealth(c, state));
    }
  });

  it('refuses a check after an upgrade step that names no version', () => {
    expect(invalidHealthCheck(criteria('pre'))).toBeUndefined();
    expect(invalidHealthCheck(criteria('post'))).toBe('health check scope post needs a version');
    expect(() => evaluateHealth(criteria('workers'), state)).toThrow('health check scope workers needs a version');
  });
});

describe('kubeletMatches', () => {
  it('takes the leading v as optional and build metadata only when wanted', () => {
    expect(kubeletMatches('v1.32.4', '1.32.4')).toBe(true);
    expect(kubeletMatches('v1.32.4+k3s1', 'v1.32.4')).toBe(true);
    expect(kubeletMatches('v1.32.4+k3s1', 'v1.32.4+k3s2')).toBe(false);
    expect(kubeletMatches('v1.32.3', 'v1.32.4')).toBe(false);
  });
});

describe('pdbSelectorMatches', () => {
  it('applies a policy/v1 selector as the API server does', () => {
    expect(pdbSelectorMatches({}, { app: 'x' })).toBe(true);
    expect(pdbSelectorMatches(undefined, { app: 'x' })).toBe(false);
    const expr = { matchExpressions: [{ key: 'tier', operator: 'NotIn', values: ['db'] }] };
    expect(pdbSelectorMatches(expr, { tier: 'web' })).toBe(true);
    expect(pdbSelectorMatches(expr, { tier: 'db' })).toBe(false);
  });
});

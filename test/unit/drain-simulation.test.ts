// The drain simulation of the readiness check: what each node's drain would evict, skip and stop
// at (drain.ts's rules), and every PodDisruptionBudget that would refuse its evictions.
import { describe, expect, it } from '@jest/globals';
import type { V1Pod, V1PodDisruptionBudget } from '@kubernetes/client-node';
import {
  listText,
  simulateDrain,
  SIMULATION_LIST_CAP,
  SIMULATION_NODE_CAP,
} from '../../src/domain/drain-simulation.ts';
import { drainCheck } from '../../src/domain/readiness.ts';

const OPTIONS = { deleteEmptyDirData: false, force: false };

function pod(name: string, node: string, o: { labels?: Record<string, string>; owner?: string | null } = {}): V1Pod {
  const owner = o.owner === undefined ? 'ReplicaSet' : o.owner;
  return {
    metadata: {
      name,
      namespace: 'shop',
      labels: o.labels ?? { app: 'web' },
      ...(owner ? { ownerReferences: [{ apiVersion: 'v1', kind: owner, name: 'o', uid: 'u', controller: true }] } : {}),
    },
    spec: { nodeName: node, containers: [] },
    status: { phase: 'Running', conditions: [{ type: 'Ready', status: 'True' }] },
  };
}

function pdb(name: string, spec: V1PodDisruptionBudget['spec'], status?: Partial<V1PodDisruptionBudget['status']>) {
  return {
    metadata: { name, namespace: 'shop' },
    spec: { selector: { matchLabels: { app: 'web' } }, ...spec },
    ...(status
      ? { status: { currentHealthy: 0, desiredHealthy: 0, disruptionsAllowed: 0, expectedPods: 0, ...status } }
      : {}),
  } as V1PodDisruptionBudget;
}

describe('simulateDrain', () => {
  it('names a PDB whose minAvailable equals the replicas on a node, with the pods it covers', () => {
    const pods = [pod('web-b', 'w1'), pod('web-a', 'w1')];
    const sim = simulateDrain(['w2', 'w1'], pods, [pdb('web', { minAvailable: 2 })], OPTIONS);
    expect(sim.nodes.map((n) => n.node)).toEqual(['w1', 'w2']);
    expect(sim.nodes[0]).toEqual({
      node: 'w1',
      evict: { names: ['shop/web-a', 'shop/web-b'], total: 2 },
      skip: { names: [], total: 0 },
      blockers: { names: [], total: 0 },
      pdbs: [
        {
          pdb: 'shop/web',
          reason: 'minAvailable 2 with 2 healthy: evicting one leaves 1',
          covers: { names: ['shop/web-a', 'shop/web-b'], total: 2 },
        },
      ],
    });
    expect(sim.nodes[1]?.pdbs).toEqual([]);
    expect(drainCheck(sim)).toEqual({
      check: 'drain',
      verdict: 'Blocked',
      message:
        "node w1: PodDisruptionBudget shop/web (minAvailable 2 with 2 healthy: evicting one leaves 1) covers shop/web-a, shop/web-b (relax the budget's minAvailable or add replicas on other nodes; label pods the drain may leave cluster.x-k8s.io/drain=skip)",
    });
  });

  it('is Ready once the budget lets the evictions go, counting what moves', () => {
    const pods = [pod('web-a', 'w1'), pod('web-b', 'w1'), pod('ds', 'w1', { owner: 'DaemonSet' })];
    // minAvailable 1 of 2 on one node: the drain evicts one, waits for its replacement, then the other.
    const sim = simulateDrain(['w1'], pods, [pdb('web', { minAvailable: 1 })], OPTIONS);
    expect(drainCheck(sim)).toEqual({
      check: 'drain',
      verdict: 'Ready',
      message: '1 nodes drain: 2 pods to evict, 1 skipped, none blocking',
    });
  });

  it('reads status.disruptionsAllowed 0 as a hold, and a percentage of the expected pods', () => {
    const pods = [pod('web-a', 'w1'), pod('web-b', 'w2')];
    const zero = simulateDrain(
      ['w1'],
      pods,
      [pdb('web', { maxUnavailable: 1 }, { disruptionsAllowed: 0, currentHealthy: 1 })],
      OPTIONS,
    );
    expect(zero.nodes[0]?.pdbs.map((h) => h.reason)).toEqual(['disruptionsAllowed 0']);
    const pct = simulateDrain(
      ['w1'],
      pods,
      [pdb('web', { minAvailable: '100%' }, { disruptionsAllowed: 1, currentHealthy: 2, expectedPods: 2 })],
      OPTIONS,
    );
    expect(pct.nodes[0]?.pdbs.map((h) => h.reason)).toEqual(['minAvailable 2 with 2 healthy: evicting one leaves 1']);
    const fine = simulateDrain(
      ['w1'],
      pods,
      [pdb('web', { minAvailable: '50%' }, { disruptionsAllowed: 1, currentHealthy: 2, expectedPods: 2 })],
      OPTIONS,
    );
    expect(fine.nodes[0]?.pdbs).toEqual([]);
  });

  it('ignores budgets in other namespaces or over pods the drain does not evict', () => {
    const pods = [pod('web-a', 'w1', { owner: 'DaemonSet' })];
    const other = { ...pdb('web', { minAvailable: 1 }), metadata: { name: 'web', namespace: 'other' } };
    const sim = simulateDrain(['w1'], pods, [pdb('web', { minAvailable: 1 }), other], OPTIONS);
    expect(sim.nodes[0]?.pdbs).toEqual([]);
  });

  it('reports the pods that stop the drain under its options, with drain.ts reasons', () => {
    const sim = simulateDrain(['w1'], [pod('bare', 'w1', { owner: null })], [], OPTIONS);
    expect(sim.nodes[0]?.blockers).toEqual({ names: ['shop/bare (declares no controller)'], total: 1 });
    expect(drainCheck(sim).message).toMatch(/^node w1 blocked by shop\/bare \(declares no controller\) \(relax/);
    const forced = simulateDrain(['w1'], [pod('bare', 'w1', { owner: null })], [], { ...OPTIONS, force: true });
    expect(forced.nodes[0]?.evict.total).toBe(1);
  });

  it('keeps at most SIMULATION_LIST_CAP names per list, and the count', () => {
    const pods = Array.from({ length: 25 }, (_, i) => pod(`p-${String(i).padStart(2, '0')}`, 'w1'));
    const sim = simulateDrain(['w1'], pods, [], OPTIONS);
    expect(sim.nodes[0]?.evict.names).toHaveLength(SIMULATION_LIST_CAP);
    expect(sim.nodes[0]?.evict.total).toBe(25);
    expect(listText(sim.nodes[0]!.evict, 2)).toBe('shop/p-00, shop/p-01 and 23 more');
  });

  it('details at most SIMULATION_NODE_CAP nodes, the held ones first, and counts them all', () => {
    const names = Array.from({ length: 150 }, (_, i) => `n-${String(i).padStart(3, '0')}`);
    const pods = [pod('bare', 'n-149', { owner: null }), pod('web-a', 'n-000')];
    const sim = simulateDrain(names, pods, [], OPTIONS);
    expect(sim.nodes).toHaveLength(SIMULATION_NODE_CAP);
    expect(sim.nodes.map((n) => n.node).slice(0, 2)).toEqual(['n-149', 'n-000']);
    expect(sim.totals).toEqual({ nodes: 150, held: 1, evict: 1, skip: 0 });
    expect(drainCheck(sim).message).toMatch(/^node n-149 blocked by shop\/bare/);
  });

  it('gives the same answer whatever order the pods come in', () => {
    const pods = [pod('web-a', 'w1'), pod('web-b', 'w1'), pod('web-c', 'w2')];
    const budgets = [pdb('web', { minAvailable: 3 })];
    expect(simulateDrain(['w1', 'w2'], [...pods].reverse(), budgets, OPTIONS)).toEqual(
      simulateDrain(['w2', 'w1'], pods, budgets, OPTIONS),
    );
  });
});

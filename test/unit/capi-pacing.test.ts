// CAPI v1.14's deferral rules (exp/topology/desiredstate isMachineDeploymentDeferred and
// isMachinePoolDeferred), as the fleet rollout reads them from a Cluster's topology.
import { describe, expect, it } from '@jest/globals';
import {
  CAPI_DEFER_UPGRADE_ANNOTATION as DEFER,
  CAPI_HOLD_UPGRADE_SEQUENCE_ANNOTATION as HOLD,
  capiDeferral,
  isDeferralMessage,
  type PacedTopology,
} from '../../src/domain/capi-pacing.ts';

const md = (name: string, ...annotations: string[]) => ({
  name,
  metadata: { annotations: Object.fromEntries(annotations.map((a) => [a, ''])) },
});
const mds = (...list: ReturnType<typeof md>[]): PacedTopology => ({ workers: { machineDeployments: list } });

describe('capiDeferral', () => {
  it('finds nothing without the annotations, without workers, or without a topology', () => {
    expect(capiDeferral(mds(md('md-0'), md('md-1', 'unrelated/annotation')))).toBeUndefined();
    expect(capiDeferral({})).toBeUndefined();
    expect(capiDeferral(undefined)).toBeUndefined();
  });

  it('defer-upgrade defers that MachineDeployment only', () => {
    const d = capiDeferral(mds(md('md-0'), md('md-1', DEFER), md('md-2')));
    expect(d).toEqual({
      annotation: DEFER,
      deferred: ['MachineDeployment md-1'],
      message: `deferred by CAPI annotation ${DEFER} (MachineDeployment md-1)`,
    });
    expect(isDeferralMessage(d?.message)).toBe(true);
  });

  it('hold-upgrade-sequence defers that MachineDeployment and every one after it in the list', () => {
    expect(capiDeferral(mds(md('md-0'), md('md-1', HOLD), md('md-2')))?.deferred).toEqual([
      'MachineDeployment md-1',
      'MachineDeployment md-2',
    ]);
    // On the first one: the whole workers upgrade waits (CAPI's "pause after the control plane").
    expect(capiDeferral(mds(md('md-0', HOLD), md('md-1')))?.message).toBe(
      `deferred by CAPI annotation ${HOLD} (MachineDeployment md-0, MachineDeployment md-1)`,
    );
  });

  it('names both annotations when both defer, and MachinePools with their own list', () => {
    const d = capiDeferral({
      workers: { machineDeployments: [md('md-0', DEFER)], machinePools: [md('mp-0'), md('mp-1', HOLD)] },
    });
    expect(d?.annotation).toBe(DEFER);
    expect(d?.message).toBe(
      `deferred by CAPI annotation ${DEFER} and ${HOLD} (MachineDeployment md-0, MachinePool mp-1)`,
    );
  });

  it('a hold on a MachineDeployment does not hold the MachinePools (separate sequences)', () => {
    const d = capiDeferral({ workers: { machineDeployments: [md('md-0', HOLD)], machinePools: [md('mp-0')] } });
    expect(d?.deferred).toEqual(['MachineDeployment md-0']);
  });

  it('keeps the message short and deterministic for many workers', () => {
    const list = Array.from({ length: 50 }, (_, i) => md(`md-${String(i).padStart(2, '0')}`));
    list[10] = md('md-10', HOLD);
    const d = capiDeferral(mds(...list));
    expect(d?.deferred).toHaveLength(40);
    expect(d?.message).toBe(
      `deferred by CAPI annotation ${HOLD} (MachineDeployment md-10, MachineDeployment md-11, MachineDeployment md-12, 37 more)`,
    );
    expect(capiDeferral(mds(...list))?.message).toBe(d?.message);
  });

  it('agrees with CAPI on random lists (seeded): deferred iff defer on it or hold on it or before it', () => {
    let seed = 306;
    const rand = () => (seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31;
    for (let round = 0; round < 500; round++) {
      const list = Array.from({ length: 1 + Math.floor(rand() * 8) }, (_, i) => {
        const r = rand();
        return md(`md-${i}`, ...(r < 0.15 ? [DEFER] : r < 0.25 ? [HOLD] : r < 0.3 ? [DEFER, HOLD] : []));
      });
      // CAPI's isMachineDeploymentDeferred, transcribed: the oracle.
      const capi = (i: number) => {
        const own = list[i]?.metadata.annotations ?? {};
        if (DEFER in own || HOLD in own) return true;
        return list.slice(0, i).some((m) => HOLD in m.metadata.annotations);
      };
      const expected = list.filter((_, i) => capi(i)).map((m) => `MachineDeployment ${m.name}`);
      expect(capiDeferral(mds(...list))?.deferred ?? []).toEqual(expected);
    }
  });
});

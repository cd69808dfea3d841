// Which node conditions make a kubelet reject the upgrade pod: the preflight waits on these.
import { describe, expect, it } from '@jest/globals';
import type { V1Node } from '@kubernetes/client-node';
import { rejectingPressure } from '../../src/domain/node-pressure.ts';

const node = (conditions: [string, string][]): V1Node => ({
  status: { conditions: conditions.map(([type, status]) => ({ type, status })) },
});

describe('rejectingPressure', () => {
  it('names DiskPressure and PIDPressure when True, in a fixed order', () => {
    expect(
      rejectingPressure(
        node([
          ['PIDPressure', 'True'],
          ['Ready', 'True'],
          ['DiskPressure', 'True'],
        ]),
      ),
    ).toEqual(['DiskPressure', 'PIDPressure']);
  });

  it('ignores MemoryPressure (the upgrade pod tolerates it), False and Unknown, and a node without status', () => {
    expect(
      rejectingPressure(
        node([
          ['MemoryPressure', 'True'],
          ['DiskPressure', 'False'],
          ['PIDPressure', 'Unknown'],
        ]),
      ),
    ).toEqual([]);
    expect(rejectingPressure({})).toEqual([]);
  });
});

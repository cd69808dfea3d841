// What the readiness stubs answer in workflow tests: a two-node workload cluster whose drain
// would evict shop/web-a and shop/web-b from worker w-1, and the budget that can hold them there.
import type { DrainSurvey, DrainSurveyInput } from '../../src/activities/readiness-types.ts';
import type { ReadinessCheck } from '../../src/domain/readiness.ts';

type PdbHold = DrainSurvey['simulation']['nodes'][number]['pdbs'][number];

const NONE = { names: [], total: 0 };

/** A PodDisruptionBudget with minAvailable = the Deployment's replicas, both on w-1. */
export const PDB_HOLD: PdbHold = {
  pdb: 'shop/web',
  reason: 'minAvailable 2 with 2 healthy: evicting one leaves 1',
  covers: { names: ['shop/web-a', 'shop/web-b'], total: 2 },
};

/** The survey of kubelets at `version`; `pdbs` hold w-1's drain. */
export function drainSurvey(pdbs: PdbHold[] = [], version = 'v1.33.0'): DrainSurvey {
  return {
    kubelets: [
      { node: 'cp-1', version, controlPlane: true },
      { node: 'w-1', version, controlPlane: false },
    ],
    simulation: {
      nodes: [
        { node: 'cp-1', evict: NONE, skip: NONE, blockers: NONE, pdbs: [] },
        { node: 'w-1', evict: { names: ['shop/web-a', 'shop/web-b'], total: 2 }, skip: NONE, blockers: NONE, pdbs },
      ],
      totals: { nodes: 2, held: pdbs.length > 0 ? 1 : 0, evict: 2, skip: 0 },
    },
  };
}

/** What the survey answers for the gates its input asks for: each Ready (capacity, in-place when asked, alerts). */
export function readyGates(input?: DrainSurveyInput): ReadinessCheck[] | undefined {
  const g = input?.gates;
  if (!g) return undefined;
  return [
    { check: 'capacity', verdict: 'Ready', message: 'no capacity reservation (capacityReservation 0)' },
    ...(g.inPlace
      ? [
          {
            check: 'in-place' as const,
            verdict: 'Ready' as const,
            message: 'nodeUpgradeExecutor job: no node agent to check',
          },
        ]
      : []),
    { check: 'alerts', verdict: 'Ready', message: 'no alert gate configured (alertPrometheusUrl is not set)' },
  ];
}

// The look ahead at the next wave: while a wave runs or soaks, each cluster of
// the next one gets a readiness run (the checks its upgrade's gates and drain
// will make), and the status and memo name the ones that are Blocked. Advisory and concurrent: the wave
// in progress never waits for it, and the next wave opens whatever it found.
import { isCancellation, patched, proxyActivities } from '@temporalio/workflow';
import type { FleetActivities } from '../../activities/fleet-types.ts';
import { nextWaveChecked, nextWaveChecking, nextWaveUnknown } from '../../domain/fleet-next-wave.ts';
import type { RolloutCluster } from '../../model/fleet-rollout.ts';
import { failureCause } from '../failures.ts';
import type { RolloutState } from './state.ts';

/** patched() marker of the look ahead: rollouts recorded before it replay without it. */
export const NEXT_WAVE_PATCH = 'fleet-next-wave-check';
/** The look checks each cluster's whole readiness (before it: the health check only). */
export const NEXT_WAVE_READINESS_PATCH = 'fleet-next-wave-readiness';

// A read for advice: a couple of tries, then the look says it could not tell. Batches of clusters
// keep each call well within its timeout.
const acts = proxyActivities<Pick<FleetActivities, 'checkClustersHealth'>>({
  startToCloseTimeout: '5 minutes',
  retry: { initialInterval: '2 seconds', backoffCoefficient: 2, maximumInterval: '30 seconds', maximumAttempts: 2 },
});
// A batch's readiness runs, a few at a time, each up to its own 10-minute limit: heartbeats say it is alive.
const readinessActs = proxyActivities<Pick<FleetActivities, 'checkClustersReadiness'>>({
  startToCloseTimeout: '30 minutes',
  heartbeatTimeout: '1 minute',
  retry: { initialInterval: '2 seconds', backoffCoefficient: 2, maximumInterval: '30 seconds', maximumAttempts: 2 },
});

/** Clusters per activity: it checks them a few at a time and must end well within its timeout. */
const BATCH = 20;

/**
 * Starts a look at the wave after `n` without waiting for it. `again`: look even when this wave was looked
 * at already (a soak starts: the clusters may have changed since). The wave's own opening drops the last look.
 */
export function lookAhead(s: RolloutState, n: number, again: boolean): void {
  if (s.status.nextWave?.wave === n) s.setNextWave(undefined);
  const next = s.status.waves[n];
  if (!next || next.state !== 'pending' || s.lookingAhead) return;
  const last = s.status.nextWave;
  if (!again && last?.wave === next.wave && last.state === 'checked') return;
  const clusters = s.clustersOf(next.wave, 'pending');
  if (clusters.length === 0) return;
  if (!patched(NEXT_WAVE_PATCH)) return;
  s.lookingAhead = true;
  s.setNextWave(nextWaveChecking(next.wave, clusters.length, last));
  void look(s, next.wave, clusters).finally(() => {
    s.lookingAhead = false;
  });
}

const name = (c: RolloutCluster) => `${c.namespace}/${c.name}`;
const selected = ({ namespace, name, uid, version }: RolloutCluster) => ({ namespace, name, uid, version });

/**
 * One look: each cluster's readiness (the health check only in runs from before it) before its upgrade; a
 * result that comes after its wave opened is dropped.
 */
async function look(s: RolloutState, wave: number, clusters: RolloutCluster[]): Promise<void> {
  const readiness = patched(NEXT_WAVE_READINESS_PATCH);
  let result;
  try {
    const found: { uid: string; summary: string; unknown?: boolean }[] = [];
    for (let i = 0; i < clusters.length; i += BATCH) {
      // The wave opened meanwhile: its clusters' own gates say the rest.
      if (s.wave(wave).state !== 'pending') return;
      const batch = clusters.slice(i, i + BATCH).map(selected);
      const version = s.status.targetVersion;
      if (readiness) {
        const findings = await readinessActs.checkClustersReadiness({ clusters: batch, version });
        found.push(...findings.map((f) => ({ uid: f.uid, summary: f.finding, unknown: f.verdict === 'Unknown' })));
      } else found.push(...(await acts.checkClustersHealth({ clusters: batch, version, scope: 'pre' })));
    }
    const holding = clusters.flatMap((c) => {
      const u = found.find((x) => x.uid === c.uid && !x.unknown);
      return u ? [{ cluster: name(c), finding: u.summary }] : [];
    });
    const unknown = clusters.filter((c) => found.some((x) => x.uid === c.uid && x.unknown)).map(name);
    result = nextWaveChecked(wave, clusters.length, holding, readiness ? { unknown } : undefined);
  } catch (err) {
    // Advice only: a failed look never fails the rollout.
    if (isCancellation(err)) return;
    result = nextWaveUnknown(wave, clusters.length, failureCause(err));
  }
  if (s.wave(wave).state === 'pending') s.setNextWave(result);
}

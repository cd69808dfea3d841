// The look ahead at the next wave: while a wave runs or soaks, each cluster of
// the next one gets the health check its upgrade's gate will make, and the
// status and memo name the ones that fail it. Advisory and concurrent: the wave
// in progress never waits for it, and the next wave opens whatever it found.
import { isCancellation, patched, proxyActivities } from '@temporalio/workflow';
import type { FleetActivities } from '../../activities/fleet-types.ts';
import { nextWaveChecked, nextWaveChecking, nextWaveUnknown } from '../../domain/fleet-next-wave.ts';
import type { RolloutCluster } from '../../model/fleet-rollout.ts';
import { failureCause } from '../failures.ts';
import type { RolloutState } from './state.ts';

/** patched() marker of the look ahead: rollouts recorded before it replay without it. */
export const NEXT_WAVE_PATCH = 'fleet-next-wave-check';

// A read for advice: a couple of tries, then the look says it could not tell. Batches of clusters
// keep each call well within its timeout.
const acts = proxyActivities<Pick<FleetActivities, 'checkClustersHealth'>>({
  startToCloseTimeout: '5 minutes',
  retry: { initialInterval: '2 seconds', backoffCoefficient: 2, maximumInterval: '30 seconds', maximumAttempts: 2 },
});

/** Clusters per activity: it reads them one after the other and must end well within its timeout. */
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

/** One look: the health check of `clusters` before their upgrade; a result that comes after its wave opened is dropped. */
async function look(s: RolloutState, wave: number, clusters: RolloutCluster[]): Promise<void> {
  const name = (c: RolloutCluster) => `${c.namespace}/${c.name}`;
  let result;
  try {
    const unhealthy: { uid: string; summary: string }[] = [];
    for (let i = 0; i < clusters.length; i += BATCH) {
      // The wave opened meanwhile: its clusters' own gates say the rest.
      if (s.wave(wave).state !== 'pending') return;
      const batch = clusters.slice(i, i + BATCH);
      unhealthy.push(
        ...(await acts.checkClustersHealth({
          clusters: batch.map(({ namespace, name, uid, version }) => ({ namespace, name, uid, version })),
          version: s.status.targetVersion,
          scope: 'pre',
        })),
      );
    }
    const holding = clusters.flatMap((c) => {
      const u = unhealthy.find((x) => x.uid === c.uid);
      return u ? [{ cluster: name(c), finding: u.summary }] : [];
    });
    result = nextWaveChecked(wave, clusters.length, holding);
  } catch (err) {
    // Advice only: a failed look never fails the rollout.
    if (isCancellation(err)) return;
    result = nextWaveUnknown(wave, clusters.length, failureCause(err));
  }
  if (s.wave(wave).state === 'pending') s.setNextWave(result);
}

// One function per step of a fleet rollout: the selection, a wave's run
// (start clusters, follow them), the health re-check after a soak, and the
// two ways a rollout stops early. The loop over the waves is in workflow.ts.
import {
  ApplicationFailure,
  CancellationScope,
  condition,
  isCancellation,
  patched,
  proxyActivities,
  upsertSearchAttributes,
} from '@temporalio/workflow';
import type { FleetActivities } from '../../activities/fleet-types.ts';
import { checkRolloutInput, planRollout } from '../../domain/fleet-rollout-plan.ts';
import { isDeferralMessage } from '../../domain/capi-pacing.ts';
import { formatDuration } from '../../domain/durations.ts';
import type {
  FleetRolloutInput,
  FleetRolloutStatus,
  RolloutCluster,
  SelectedCluster,
} from '../../model/fleet-rollout.ts';
import { FleetRollout } from '../../model/search-attributes.ts';
import { CAPI_PACING_PATCH, iso, type RolloutState } from './state.ts';

const acts = proxyActivities<FleetActivities>({
  startToCloseTimeout: '5 minutes',
  heartbeatTimeout: '30 seconds',
  retry: { initialInterval: '2 seconds', backoffCoefficient: 2, maximumInterval: '1 minute', maximumAttempts: 10 },
});

/** The longest one wait on the clusters lasts: deadlines, pause and history are looked at in between. */
const FOLLOW_WAIT_MS = 60_000;

/** Checks the input, resolves the selection once and plans the waves; bad input fails the run, naming the field. */
export async function select(s: RolloutState, input: FleetRolloutInput): Promise<void> {
  const checked = checkRolloutInput(input);
  if (!checked.ok) throw ApplicationFailure.nonRetryable(checked.message, 'InvalidRolloutInput');
  s.settings = checked.value;
  upsertSearchAttributes([{ key: FleetRollout, value: input.name }]);
  s.set('Running', 'selecting clusters');
  const selected = await acts.selectClusters({ selector: input.selector });
  const plan = planRollout(input, selected);
  if (!plan.ok) throw ApplicationFailure.nonRetryable(plan.message, 'InvalidRolloutInput');
  s.status.waves = plan.value.waves;
  s.status.clusters = plan.value.clusters;
}

/** What an activity needs of a cluster: how it was selected, without the rollout's bookkeeping. */
function selected({ namespace, name, uid, version }: RolloutCluster): SelectedCluster {
  return { namespace, name, uid, version };
}

/** One wave to its end: 'done', 'stopped' (budget), 'aborted', or 'continue' (history full; picked up as new). */
export async function runWave(s: RolloutState, n: number): Promise<'done' | 'stopped' | 'aborted' | 'continue'> {
  for (;;) {
    if (s.abort) return 'aborted';
    if (s.clustersOf(n, 'failed').length > s.budget()) return 'stopped';
    const pending = s.clustersOf(n, 'pending');
    const inFlight = s.upgrading();
    // A deferred cluster stays in its wave: CAPI would not complete its upgrade until the annotation goes.
    const deferred = s.clustersOf(n, 'deferred');
    if (pending.length === 0 && inFlight.length === 0 && deferred.length === 0) return 'done';
    if (s.historyFull()) return 'continue';
    s.set(s.paused ? 'Paused' : 'Running', s.paused ? `paused: ${s.waveMessage(n)}` : s.waveMessage(n));
    const room = s.paused ? 0 : Math.max(0, s.settings.maxConcurrent - inFlight.length);
    if (room > 0 && pending.length > 0) {
      await startClusters(s, pending.slice(0, room));
      continue;
    }
    if (room > 0 && deferred.length > 0 && s.deferralDue()) {
      // Another look: the ones whose annotation went are started now, the others stay deferred.
      s.deferralCheckedAt = Date.now();
      await startClusters(s, deferred.slice(0, room));
      continue;
    }
    if (inFlight.length === 0 && deferred.length > 0 && !s.paused) {
      // Only deferred clusters left: wait for the next look (pause and abort end the wait).
      await condition(
        () => s.paused || s.abort !== undefined,
        Math.max(1_000, s.deferralCheckedAt + s.deferralRecheckMs - Date.now()),
      );
      continue;
    }
    if (inFlight.length === 0) {
      // Paused with nothing in flight: wait for resume (or abort).
      await condition(() => !s.paused || s.abort !== undefined);
      continue;
    }
    await follow(s, inFlight);
  }
}

async function startClusters(s: RolloutState, batch: RolloutCluster[]): Promise<void> {
  const results = await acts.setClusterVersions({
    rollout: s.status.name,
    target: s.status.targetVersion,
    clusters: batch.map(selected),
  });
  for (const c of batch) {
    const r = results.find((x) => x.uid === c.uid);
    if (r?.outcome === 'set' || r?.outcome === 'already') s.setCluster(c, 'upgrading', 'version set');
    else if (r?.outcome === 'gone') s.setCluster(c, 'skipped', 'deleted since it was selected');
    // Only a run on this code gets `deferred` (the activity is as new as the workflow); the marker says so.
    else if (r?.outcome === 'deferred' && patched(CAPI_PACING_PATCH)) {
      s.setCluster(c, 'deferred', r.deferredBy ?? 'deferred by CAPI annotation');
      s.deferralCheckedAt = Date.now();
    } else
      s.setCluster(c, 'skipped', `version changed by someone else to ${r?.found ?? 'unknown'} since it was selected`);
  }
}

/** Waits (in one activity, up to a minute) for a change in the clusters in flight, then records it. */
async function follow(s: RolloutState, inFlight: RolloutCluster[]): Promise<void> {
  const now = Date.now();
  const deadlineOf = (c: RolloutCluster) => Date.parse(c.startedAt ?? iso(now)) + s.settings.clusterDeadlineMs;
  for (const c of inFlight)
    // While CAPI defers its workers the cluster is not late: the operator holds it.
    if (now >= deadlineOf(c) && !isDeferralMessage(c.reason))
      s.setCluster(
        c,
        'failed',
        `did not finish within the cluster deadline ${formatDuration(s.settings.clusterDeadlineMs)}`,
      );
  const still = inFlight.filter((c) => c.state === 'upgrading');
  if (still.length === 0) return;
  const timed = still.filter((c) => !isDeferralMessage(c.reason));
  const waitMs = Math.max(1_000, Math.min(FOLLOW_WAIT_MS, ...timed.map((c) => deadlineOf(c) - now)));
  const scope = new CancellationScope();
  s.scope = scope;
  try {
    const progress = await scope.run(() =>
      acts.awaitClusterUpgrades({
        target: s.status.targetVersion,
        clusters: still.map((c) => ({
          cluster: selected(c),
          known: 'upgrading' as const,
        })),
        waitMs,
      }),
    );
    for (const p of progress) {
      const c = still.find((x) => x.uid === p.uid);
      if (!c) continue;
      if (p.state !== 'upgrading') s.setCluster(c, p.state, p.message);
      // CAPI's annotation came (or went) while it upgrades: shown in its reason, no history.
      else if (isDeferralMessage(p.message)) s.setCluster(c, 'upgrading', p.message);
      else if (isDeferralMessage(c.reason)) s.setCluster(c, 'upgrading', 'version set');
    }
  } catch (err) {
    // Pause or abort ended the wait early; the loop looks at why.
    if (!isCancellation(err)) throw err;
  } finally {
    s.scope = undefined;
  }
}

/** After the soak: the wave's upgraded clusters must still be healthy; the unhealthy ones count as failed. */
export async function recheck(s: RolloutState, n: number): Promise<boolean> {
  const done = s.clustersOf(n, 'done');
  if (done.length > 0) {
    s.set('Running', `wave ${n}: re-checking the health of ${done.length} upgraded clusters`);
    const unhealthy = await acts.checkClustersHealth({
      clusters: done.map(selected),
      version: s.status.targetVersion,
    });
    for (const u of unhealthy) {
      const c = done.find((x) => x.uid === u.uid);
      if (c) s.setCluster(c, 'failed', `unhealthy after the soak: ${u.summary}`);
    }
  }
  return s.clustersOf(n, 'failed').length <= s.budget();
}

export function stopped(s: RolloutState, n: number): FleetRolloutStatus {
  s.wave(n).state = 'stopped';
  const failed = s.clustersOf(n, 'failed').length;
  s.status.completeTime = iso(Date.now());
  s.set(
    'Stopped',
    `stopped: ${failed} cluster${failed === 1 ? '' : 's'} of wave ${n} failed, more than the failure budget ${s.budget()}; no further clusters started`,
  );
  return s.status;
}

export async function aborted(s: RolloutState): Promise<FleetRolloutStatus> {
  const abort = s.abort ?? { reason: 'aborted', abortInFlight: false };
  const inFlight = s.upgrading();
  if (abort.abortInFlight && inFlight.length > 0) {
    await CancellationScope.nonCancellable(() =>
      acts.abortClusterUpgrades({
        clusters: inFlight.map(selected),
        reason: `fleet rollout ${s.status.name} aborted: ${abort.reason}`,
      }),
    );
    for (const c of inFlight) s.setCluster(c, 'failed', 'aborted with the rollout');
  } else {
    for (const c of inFlight) s.setCluster(c, 'upgrading', 'left to finish on its own (the rollout was aborted)');
  }
  for (const w of s.status.waves) if (w.state !== 'done') w.state = 'stopped';
  s.status.completeTime = iso(Date.now());
  s.set('Aborted', `aborted: ${abort.reason}`);
  return s.status;
}

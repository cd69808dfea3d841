// A fleet rollout: many clusters upgraded to one version in waves. The
// selection is resolved once (an activity result: in history, stable order);
// each wave moves its clusters' spec.topology.version at most `maxConcurrent`
// at a time and follows their cluster-upgrade workflows until done or failed;
// more failures in a wave than the budget stop the rollout; after a wave, a
// soak, a health re-check of its clusters, and approval gates where asked.
// pause / resume / approve / abort are signals; `status` is the query. The run
// continues as new before its history reaches 2,000 events, whatever the size.
import {
  ApplicationFailure,
  CancellationScope,
  condition,
  continueAsNew,
  isCancellation,
  proxyActivities,
  setHandler,
  upsertSearchAttributes,
} from '@temporalio/workflow';
import { setVersioningBehavior } from './versioning.ts';
import type { FleetActivities } from '../activities/fleet-types.ts';
import { checkRolloutInput, planRollout } from '../domain/fleet-rollout-plan.ts';
import type { FleetRolloutInput, FleetRolloutStatus, RolloutCluster, SelectedCluster } from '../model/fleet-rollout.ts';
import { formatDuration } from '../domain/durations.ts';
import {
  abortRolloutSignal,
  approveWaveSignal,
  fleetRolloutStatusQuery,
  pauseRolloutSignal,
  resumeSignal,
} from './messages.ts';
import { FleetRollout } from '../model/search-attributes.ts';
import { iso, RolloutState, type CarriedRollout } from './fleet-rollout/state.ts';

const acts = proxyActivities<FleetActivities>({
  startToCloseTimeout: '5 minutes',
  heartbeatTimeout: '30 seconds',
  retry: { initialInterval: '2 seconds', backoffCoefficient: 2, maximumInterval: '1 minute', maximumAttempts: 10 },
});

/** The longest one wait on the clusters lasts: deadlines, pause and history are looked at in between. */
const FOLLOW_WAIT_MS = 60_000;

export async function fleetRolloutWorkflow(
  input: FleetRolloutInput,
  carried?: CarriedRollout,
): Promise<FleetRolloutStatus> {
  const s = carried ? new RolloutState(carried.status, carried.settings, carried) : new RolloutState(empty(input));
  if (input.continueAsNewAtEvents !== undefined) s.historyLimit = input.continueAsNewAtEvents;
  // Before the selection: a query or signal may come while it runs.
  setHandler(fleetRolloutStatusQuery, () => s.status);
  setHandler(approveWaveSignal, (arg) => s.onApprove(arg));
  setHandler(pauseRolloutSignal, () => s.onPause());
  setHandler(resumeSignal, () => s.onResume());
  setHandler(abortRolloutSignal, (arg) => s.onAbort(arg));
  if (!carried) await select(s, input);
  s.publish();

  for (const wave of s.status.waves) {
    if (wave.state === 'done') continue;
    const n = wave.wave;
    if (s.settings.approveBefore.includes(n) && !wave.approvedBeforeBy) {
      wave.state = 'waiting-approval';
      s.set('WaitingForApproval', `waiting for approval of wave ${n} (signal approve with {"wave":${n}})`);
      await condition(() => wave.approvedBeforeBy !== undefined || s.abort !== undefined);
      if (s.abort) return await aborted(s);
    }
    if (wave.state === 'pending' || wave.state === 'waiting-approval') wave.state = 'running';
    if (wave.state === 'running') {
      const outcome = await runWave(s, n);
      if (outcome === 'continue') return await continueAsNew<typeof fleetRolloutWorkflow>(input, s.carry());
      if (outcome === 'aborted') return await aborted(s);
      if (outcome === 'stopped') return stopped(s, n);
      wave.state = 'soaking';
    }
    if (wave.state === 'soaking') {
      if (s.settings.soakMs > 0) {
        s.set('Soaking', `wave ${n} soaking for ${formatDuration(s.settings.soakMs)} before its health re-check`);
        await condition(() => s.abort !== undefined, s.settings.soakMs);
        if (s.abort) return await aborted(s);
      }
      wave.state = 'checking';
    }
    if (wave.state === 'checking') {
      if (!(await recheck(s, n))) return stopped(s, n);
      if (s.abort) return await aborted(s);
      wave.state = s.settings.approveAfter.includes(n) ? 'waiting-approval-after' : 'done';
    }
    if (wave.state === 'waiting-approval-after') {
      s.set(
        'WaitingForApproval',
        `wave ${n} finished: waiting for approval to go on (signal approve with {"wave":${n}})`,
      );
      await condition(() => wave.approvedAfterBy !== undefined || s.abort !== undefined);
      if (s.abort) return await aborted(s);
      wave.state = 'done';
    }
    s.publish();
  }
  const c = s.counts();
  s.status.completeTime = iso(Date.now());
  s.set('Completed', `completed: ${c.done} upgraded, ${c.skipped} skipped, ${c.failed} failed`);
  return s.status;
}

/** Checks the input, resolves the selection once and plans the waves; bad input fails the run, naming the field. */
async function select(s: RolloutState, input: FleetRolloutInput): Promise<void> {
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

function empty(input: FleetRolloutInput): FleetRolloutStatus {
  return {
    name: input.name,
    targetVersion: input.targetVersion,
    phase: 'Running',
    message: 'starting',
    startTime: iso(Date.now()),
    waves: [],
    clusters: [],
  };
}

/** What an activity needs of a cluster: how it was selected, without the rollout's bookkeeping. */
function selected({ namespace, name, uid, version }: RolloutCluster): SelectedCluster {
  return { namespace, name, uid, version };
}

/** One wave to its end: 'done', 'stopped' (budget), 'aborted', or 'continue' (history full; picked up as new). */
async function runWave(s: RolloutState, n: number): Promise<'done' | 'stopped' | 'aborted' | 'continue'> {
  for (;;) {
    if (s.abort) return 'aborted';
    if (s.clustersOf(n, 'failed').length > s.budget()) return 'stopped';
    const pending = s.clustersOf(n, 'pending');
    const inFlight = s.upgrading();
    if (pending.length === 0 && inFlight.length === 0) return 'done';
    if (s.historyFull()) return 'continue';
    s.set(s.paused ? 'Paused' : 'Running', s.paused ? `paused: ${s.waveMessage(n)}` : s.waveMessage(n));
    const room = s.paused ? 0 : Math.max(0, s.settings.maxConcurrent - inFlight.length);
    if (room > 0 && pending.length > 0) {
      await startClusters(s, pending.slice(0, room));
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
    else
      s.setCluster(c, 'skipped', `version changed by someone else to ${r?.found ?? 'unknown'} since it was selected`);
  }
}

/** Waits (in one activity, up to a minute) for a change in the clusters in flight, then records it. */
async function follow(s: RolloutState, inFlight: RolloutCluster[]): Promise<void> {
  const now = Date.now();
  const deadlineOf = (c: RolloutCluster) => Date.parse(c.startedAt ?? iso(now)) + s.settings.clusterDeadlineMs;
  for (const c of inFlight)
    if (now >= deadlineOf(c))
      s.setCluster(
        c,
        'failed',
        `did not finish within the cluster deadline ${formatDuration(s.settings.clusterDeadlineMs)}`,
      );
  const still = inFlight.filter((c) => c.state === 'upgrading');
  if (still.length === 0) return;
  const waitMs = Math.max(1_000, Math.min(FOLLOW_WAIT_MS, ...still.map((c) => deadlineOf(c) - now)));
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
      if (!c || p.state === 'upgrading') continue;
      s.setCluster(c, p.state, p.message);
    }
  } catch (err) {
    // Pause or abort ended the wait early; the loop looks at why.
    if (!isCancellation(err)) throw err;
  } finally {
    s.scope = undefined;
  }
}

/** After the soak: the wave's upgraded clusters must still be healthy; the unhealthy ones count as failed. */
async function recheck(s: RolloutState, n: number): Promise<boolean> {
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

function stopped(s: RolloutState, n: number): FleetRolloutStatus {
  s.wave(n).state = 'stopped';
  const failed = s.clustersOf(n, 'failed').length;
  s.status.completeTime = iso(Date.now());
  s.set(
    'Stopped',
    `stopped: ${failed} cluster${failed === 1 ? '' : 's'} of wave ${n} failed, more than the failure budget ${s.budget()}; no further clusters started`,
  );
  return s.status;
}

async function aborted(s: RolloutState): Promise<FleetRolloutStatus> {
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

// Worker Versioning: a rollout lasts days (soaks, approvals): it moves to the current build at its
// next task. Every change must replay its histories or be patched().
setVersioningBehavior('AUTO_UPGRADE', fleetRolloutWorkflow);

// A fleet rollout: many clusters upgraded to one version in waves. The
// selection is resolved once (an activity result: in history, stable order);
// each wave moves its clusters' spec.topology.version at most `maxConcurrent`
// at a time and follows their cluster-upgrade workflows until done or failed;
// more failures in a wave than the budget stop the rollout; after a wave, a
// soak, a health re-check of its clusters, and approval gates where asked.
// While a wave runs or soaks, the next one's clusters are looked at ahead
// (next-wave.ts): advice in the status and memo, never a wait.
// pause / resume / approve / abort are signals; `status` is the query. The run
// continues as new before its history reaches 2,000 events, whatever the size.
// The state and its signals are in state.ts, one function per step in steps.ts.
import { condition, continueAsNew, setHandler } from '@temporalio/workflow';
import type { FleetRolloutInput, FleetRolloutStatus } from '../../model/fleet-rollout.ts';
import { formatDuration } from '../../domain/durations.ts';
import {
  abortRolloutSignal,
  approveWaveSignal,
  fleetRolloutStatusQuery,
  pauseRolloutSignal,
  resumeSignal,
} from '../messages.ts';
import { setVersioningBehavior } from '../versioning.ts';
import { lookAhead } from './next-wave.ts';
import { aborted, recheck, runWave, select, stopped } from './steps.ts';
import { iso, RolloutState, type CarriedRollout } from './state.ts';

export async function fleetRolloutWorkflow(
  input: FleetRolloutInput,
  carried?: CarriedRollout,
): Promise<FleetRolloutStatus> {
  const s = carried ? new RolloutState(carried.status, carried.settings, carried) : new RolloutState(empty(input));
  if (input.continueAsNewAtEvents !== undefined) s.historyLimit = input.continueAsNewAtEvents;
  if (input.deferralRecheckMs !== undefined) s.deferralRecheckMs = input.deferralRecheckMs;
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
      lookAhead(s, n, false);
      const outcome = await runWave(s, n);
      if (outcome === 'continue') return await continueAsNew<typeof fleetRolloutWorkflow>(input, s.carry());
      if (outcome === 'aborted') return await aborted(s);
      if (outcome === 'stopped') return stopped(s, n);
      wave.state = 'soaking';
    }
    if (wave.state === 'soaking') {
      if (s.settings.soakMs > 0) {
        lookAhead(s, n, true);
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

// Worker Versioning: a rollout lasts days (soaks, approvals): it moves to the current build at its
// next task. Every change must replay its histories or be patched().
setVersioningBehavior('AUTO_UPGRADE', fleetRolloutWorkflow);

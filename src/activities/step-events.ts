// A machine update's milestone Events ride on the step that reaches them: the
// step's activity records its `event` once it succeeded, best effort (the step's
// result stands whatever the Event does). One activity of its own per Event
// cost a server round trip and a workflow task each: 4 of a run's 7 activities
// and 2 of its 8 workflow tasks (bench/machine-updates.ts, docs/performance.md).
import type { MachineEventInput, MachineUpdateActivities } from './machine-update-types.ts';

/** As long as the Event activity was given: a busy API server must not hold the step. */
const EVENT_TIMEOUT_MS = 10_000;

type StepName = 'cordon' | 'uncordon' | 'drain' | 'waitForNodeVersion';

/** The step activities, each recording the `event` its input carries after it succeeded. */
export function withStepEvents<A extends MachineUpdateActivities>(activities: A): A {
  const recordQuietly = async (event: MachineEventInput): Promise<void> => {
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        activities.recordMachineEvent(event),
        new Promise((resolve) => {
          timer = setTimeout(resolve, EVENT_TIMEOUT_MS);
        }),
      ]);
    } catch {
      // Best effort, as the Event activity is.
    } finally {
      clearTimeout(timer);
    }
  };
  const after =
    <K extends StepName>(name: K) =>
    async (input: Parameters<A[K]>[0]): Promise<Awaited<ReturnType<A[K]>>> => {
      const step = activities[name] as (input: Parameters<A[K]>[0]) => Promise<Awaited<ReturnType<A[K]>>>;
      const result = await step(input);
      if (input.event) await recordQuietly(input.event);
      return result;
    };
  return {
    ...activities,
    cordon: after('cordon'),
    uncordon: after('uncordon'),
    drain: after('drain'),
    waitForNodeVersion: after('waitForNodeVersion'),
  };
}

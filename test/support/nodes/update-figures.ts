// The figures of one in-place update on a real node, from what the update left behind: the
// seconds each activity of the machine-update run took (its history), and the floor, the
// seconds kubeadm's upgrade and the kubelet's restart took inside the Job (its log's
// timestamps, from the script's `kubeadm upgrade` line to its `kubelet reports` line).
import type { Client } from '@temporalio/client';

export interface UpdateFigures {
  node: string;
  /** From the first UpdateMachine call to its Success answer. */
  totalSeconds: number;
  /** Seconds per activity type (summed over attempts), e.g. drain, upgradeNode, waitForNode. */
  steps: Record<string, number>;
  /** kubeadm upgrade + kubelet restart, as the Job logged them. */
  floorSeconds: number;
}

const seconds = (t: { seconds?: unknown; nanos?: number | null } | null | undefined) =>
  t ? Number(t.seconds ?? 0) + (t.nanos ?? 0) / 1e9 : 0;

/** Seconds per activity type of a run, from ActivityTaskScheduled to its close. */
export async function activitySeconds(client: Client, workflowId: string): Promise<Record<string, number>> {
  const history = await client.workflow.getHandle(workflowId).fetchHistory();
  const scheduled = new Map<string, { name: string; at: number }>();
  const out: Record<string, number> = {};
  for (const e of history.events ?? []) {
    const at = seconds(e.eventTime as { seconds?: unknown; nanos?: number });
    const s = e.activityTaskScheduledEventAttributes;
    if (s) scheduled.set(String(e.eventId), { name: s.activityType?.name ?? '?', at });
    const closed =
      e.activityTaskCompletedEventAttributes ??
      e.activityTaskFailedEventAttributes ??
      e.activityTaskTimedOutEventAttributes ??
      e.activityTaskCanceledEventAttributes;
    const start = closed ? scheduled.get(String(closed.scheduledEventId)) : undefined;
    if (start) out[start.name] = (out[start.name] ?? 0) + (at - start.at);
  }
  return out;
}

/** kubeadm's upgrade through the kubelet's restart, from a `kubectl logs --timestamps` text. */
export function floorSeconds(timestampedLog: string): number {
  const at = (re: RegExp) => {
    const line = timestampedLog.split('\n').find((l) => re.test(l));
    return line ? Date.parse(line.split(' ')[0]!) / 1000 : Number.NaN;
  };
  return at(/\[node-upgrade\] kubelet reports/) - at(/\[node-upgrade\] kubeadm upgrade/);
}

/** A table for the tier's output (and docs/performance.md). */
export function figuresTable(rows: readonly UpdateFigures[]): string {
  const names = [...new Set(rows.flatMap((r) => Object.keys(r.steps)))].filter((n) =>
    rows.some((r) => (r.steps[n] ?? 0) >= 0.5),
  );
  const head = ['node', 'total s', ...names.map((n) => `${n} s`), 'floor s', 'total / floor'];
  const lines = rows.map((r) => [
    r.node,
    r.totalSeconds.toFixed(1),
    ...names.map((n) => (r.steps[n] ?? 0).toFixed(1)),
    r.floorSeconds.toFixed(1),
    (r.totalSeconds / r.floorSeconds).toFixed(2),
  ]);
  return [head, ...lines].map((l) => `| ${l.join(' | ')} |`).join('\n');
}

/**
 * A run's history as text with its payloads decoded (a Buffer's JSON form is
 * `{type: 'Buffer', data: [...]}`): what an operator reads in the Web UI, searchable.
 */
export function historyText(history: unknown): string {
  return JSON.stringify(history, (_k, v: unknown) => {
    if (v instanceof Uint8Array) return Buffer.from(v).toString('utf8');
    const b = v as { type?: unknown; data?: unknown };
    if (b && b.type === 'Buffer' && Array.isArray(b.data)) return Buffer.from(b.data as number[]).toString('utf8');
    return v;
  });
}

/** The decoded results of a run's completed activities of one type, in order. */
export async function activityResults(client: Client, workflowId: string, activityType: string): Promise<unknown[]> {
  const history = await client.workflow.getHandle(workflowId).fetchHistory();
  const types = new Map<string, string>();
  const out: unknown[] = [];
  for (const e of history.events ?? []) {
    const s = e.activityTaskScheduledEventAttributes;
    if (s) types.set(String(e.eventId), s.activityType?.name ?? '');
    const done = e.activityTaskCompletedEventAttributes;
    if (done && types.get(String(done.scheduledEventId)) === activityType) {
      const data = done.result?.payloads?.[0]?.data;
      out.push(data ? JSON.parse(Buffer.from(data).toString('utf8')) : undefined);
    }
  }
  return out;
}

/** The messages and decoded details of a run's failed activities of one type, in order (the Web UI's "failure"). */
export async function activityFailures(
  client: Client,
  workflowId: string,
  activityType: string,
): Promise<{ message: string; details: unknown[] }[]> {
  const history = await client.workflow.getHandle(workflowId).fetchHistory();
  const types = new Map<string, string>();
  const out: { message: string; details: unknown[] }[] = [];
  for (const e of history.events ?? []) {
    const s = e.activityTaskScheduledEventAttributes;
    if (s) types.set(String(e.eventId), s.activityType?.name ?? '');
    const failed = e.activityTaskFailedEventAttributes;
    if (failed && types.get(String(failed.scheduledEventId)) === activityType) {
      const payloads = failed.failure?.applicationFailureInfo?.details?.payloads ?? [];
      out.push({
        message: failed.failure?.message ?? '',
        details: payloads.map((p) => (p.data ? (JSON.parse(Buffer.from(p.data).toString('utf8')) as unknown) : null)),
      });
    }
  }
  return out;
}

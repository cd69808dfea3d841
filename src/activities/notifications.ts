// Optional notifications: each phase change of a cluster upgrade (started,
// completed, failed, aborted) POSTed to a webhook as a CloudEvent (structured
// JSON mode). The event's id is the Kubernetes Event's key, so a receiver can
// drop the duplicates a retry may send. Retried a few times here, then given
// up: a notification never holds an upgrade back.
import { notificationsSent } from './metrics.ts';
import type { ClusterEventInput, ClusterEventReason } from './upgrade-types.ts';

/** The reasons that are phase changes (steps opening are not notified). */
const PHASE_EVENTS: Partial<Record<ClusterEventReason, string>> = {
  UpgradeStarted: 'started',
  UpgradeCompleted: 'completed',
  UpgradeFailed: 'failed',
  UpgradeAborted: 'aborted',
};

export const CLOUDEVENT_TYPE_PREFIX = 'io.capi-orchestrator.upgrade.';
const SOURCE = 'capi-upgrade-orchestrator';

export interface NotifierOptions {
  url: string;
  /** Tries per notification (default 4), 1 s apart, doubling. */
  attempts?: number;
  /** Per request (default 4 s: all tries fit the activity's 30 s). */
  timeoutMs?: number;
  backoffMs?: number;
}

export interface CloudEvent {
  specversion: '1.0';
  id: string;
  source: string;
  type: string;
  subject: string;
  time: string;
  datacontenttype: 'application/json';
  data: { cluster: { namespace: string; name: string }; reason: ClusterEventReason; message: string };
}

export function cloudEventFor(e: ClusterEventInput, now = new Date()): CloudEvent | undefined {
  const phase = PHASE_EVENTS[e.reason];
  if (!phase) return undefined;
  return {
    specversion: '1.0',
    id: e.key,
    source: SOURCE,
    type: `${CLOUDEVENT_TYPE_PREFIX}${phase}`,
    subject: `${e.cluster.namespace}/${e.cluster.name}`,
    time: now.toISOString(),
    datacontenttype: 'application/json',
    data: { cluster: { namespace: e.cluster.namespace, name: e.cluster.name }, reason: e.reason, message: e.message },
  };
}

/** Sends the notification for a phase change; false when every try failed (counted, then given up). */
export function createNotifier(options: NotifierOptions): (e: ClusterEventInput) => Promise<boolean> {
  const attempts = options.attempts ?? 4;
  const timeoutMs = options.timeoutMs ?? 4_000;
  const backoffMs = options.backoffMs ?? 1_000;
  return async (e) => {
    const event = cloudEventFor(e);
    if (!event) return true;
    const sent = await send(event);
    notificationsSent.inc({ result: sent ? 'delivered' : 'failed' });
    return sent;
  };

  async function send(event: CloudEvent): Promise<boolean> {
    for (let attempt = 1; ; attempt++) {
      try {
        const res = await fetch(options.url, {
          method: 'POST',
          headers: { 'content-type': 'application/cloudevents+json' },
          body: JSON.stringify(event),
          signal: AbortSignal.timeout(timeoutMs),
        });
        await res.body?.cancel();
        if (res.ok) return true;
        // A 4xx other than 408/429 will not get better by asking again.
        if (res.status < 500 && res.status !== 408 && res.status !== 429) return false;
      } catch {
        // Unreachable or timed out: try again.
      }
      if (attempt >= attempts) return false;
      await new Promise((r) => setTimeout(r, backoffMs * 2 ** (attempt - 1)));
    }
  }
}

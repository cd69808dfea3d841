// What the node upgrade Job's pods leave behind when one fails or is stopped: the tail of
// its log, and why the pod itself failed when the script never printed a line (the
// kubelet rejected it, or its container was killed). Both are read from the workload
// cluster, so both are bounded and the pod's status is reduced to checked tokens.
import { ApiException, type CoreV1Api, type V1ContainerStateTerminated, type V1Pod } from '@kubernetes/client-node';

/** The upgrade container's name in the Job's pod template. */
export const UPGRADE_CONTAINER = 'upgrade';

/** The last lines of the failed upgrade pod's log: failure details (Temporal Web UI, `temporal workflow show`). */
export interface UpgradeJobLog {
  pod?: string;
  /** At most {@link LOG_TAIL_LINES} lines, {@link LOG_TAIL_BYTES} bytes. */
  lines: string[];
  /** Why there are no lines (no pod left, the kubelet could not be reached). */
  unavailable?: string;
  /** Why the pod failed, from its status ({@link podFailure}). */
  podFailure?: string;
}

const LOG_TAIL_LINES = 30;
const LOG_TAIL_BYTES = 8 * 1024;
const JOB_NAME_LABEL = 'batch.kubernetes.io/job-name';

/**
 * Reads the tail of the log of the Job's newest failed pod (`anyPhase`: its newest pod, as an abort
 * stops it); never throws (the failure or the abort matters more).
 */
export async function lastFailedPodLog(
  core: CoreV1Api,
  namespace: string,
  jobName: string,
  anyPhase = false,
): Promise<UpgradeJobLog> {
  let pod: V1Pod | undefined;
  try {
    const pods = (
      await core.listNamespacedPod({ namespace, labelSelector: `${JOB_NAME_LABEL}=${jobName}`, limit: 100 })
    ).items;
    pod = pods
      .filter((p) => anyPhase || p.status?.phase === 'Failed')
      .sort((a, b) => timeOf(b.metadata?.creationTimestamp) - timeOf(a.metadata?.creationTimestamp))[0];
  } catch (err) {
    return { lines: [], unavailable: `pods not readable: ${errorStatus(err)}` };
  }
  const name = pod?.metadata?.name;
  if (!pod || !name) return { lines: [], unavailable: anyPhase ? 'no pod left' : 'no failed pod left' };
  const failure = podFailure(pod);
  const found = { pod: name, ...(failure ? { podFailure: failure } : {}) };
  try {
    const text = await core.readNamespacedPodLog({
      name,
      namespace,
      container: UPGRADE_CONTAINER,
      tailLines: LOG_TAIL_LINES,
      limitBytes: LOG_TAIL_BYTES,
    });
    return { ...found, lines: text.split('\n').filter((l) => l.trim() !== '') };
  } catch (err) {
    return { ...found, lines: [], unavailable: `log not readable: ${errorStatus(err)}` };
  }
}

const SCRIPT_LINE = '[node-upgrade] ';

/**
 * upgrade-node.sh's own error line (`[node-upgrade] error: ...`), else its last own line: only
 * the script's lines reach CAPI (they name inputs, never contents), not what kubeadm printed.
 */
export function failedScriptLine(lines: string[]): string | undefined {
  const own = lines.filter((l) => l.startsWith(SCRIPT_LINE));
  return (own.findLast((l) => l.startsWith(`${SCRIPT_LINE}error:`)) ?? own.at(-1))?.trim();
}

// Kubernetes reasons are CamelCase words (Evicted, UnexpectedAdmissionError, OOMKilled); anything
// else the API server answers is left out rather than quoted to CAPI.
const REASON = /^[A-Za-z][A-Za-z0-9]{0,63}$/;

function reasonOf(r: string | undefined): string | undefined {
  return r !== undefined && REASON.test(r) ? r : undefined;
}

function terminated(t: V1ContainerStateTerminated): string {
  const code = Number.isSafeInteger(t.exitCode) ? t.exitCode : '?';
  const reason = reasonOf(t.reason);
  const signal = Number.isSafeInteger(t.signal) && t.signal ? `, signal ${t.signal}` : '';
  return `its container exited ${code}${reason ? ` (${reason}${signal})` : signal ? ` (${signal.slice(2)})` : ''}`;
}

/**
 * Why a failed pod failed, in words that are the same for the same status: the kubelet's reason
 * for the pod (rejected at admission, evicted, stopped by a node shutdown), else how the upgrade
 * container ended or why it never started. Undefined when the status says nothing.
 */
export function podFailure(pod: V1Pod): string | undefined {
  const podReason = reasonOf(pod.status?.reason);
  if (podReason) return `the pod failed: ${podReason}`;
  const status = pod.status?.containerStatuses?.find((c) => c.name === UPGRADE_CONTAINER);
  const ended = status?.state?.terminated ?? status?.lastState?.terminated;
  if (ended) return terminated(ended);
  const waiting = reasonOf(status?.state?.waiting?.reason);
  if (waiting) return `its container never ran: ${waiting}`;
  return status ? undefined : 'its container never started';
}

function errorStatus(err: unknown): string {
  return err instanceof ApiException ? `HTTP ${err.code}` : err instanceof Error ? err.name : 'error';
}

function timeOf(t: Date | string | undefined): number {
  return t === undefined ? 0 : new Date(t).getTime();
}

// The alert gate's side effects: read Prometheus's `GET /api/v1/alerts`
// and keep one Alertmanager silence per upgrade step (`/api/v2/silences`). Hostile input is
// bounded: the URL was checked by the policy (http(s), no credentials), every request has a
// timeout and its answer is read as a stream up to a cap, and the alert filter runs in a worker
// thread with a deadline. The bearer token is read from its Secret here and goes nowhere but the
// Authorization header: never into a message, a log or the workflow.
import { Worker } from 'node:worker_threads';
import { ApplicationFailure } from '@temporalio/common';
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import {
  alertText,
  candidateAlerts,
  holdingNames,
  SILENCE_CREATED_BY,
  silenceMatchers,
  type PrometheusAlert,
} from '../domain/alert-gate.ts';
import type { AlertPolicy, AlertReport, AlertSilenceInput, ObjectKeyRef } from '../model/alerts.ts';
import { boundedRequest, type AlertHttpOptions } from './alert-http.ts';
import type { AlertActivities, AlertCheckInput } from './alert-types.ts';
import { apiClient } from '../platform/kube/clients.ts';
import { isNotFound } from '../platform/kube/errors.ts';

/** Largest answer read from Prometheus or Alertmanager. */
export const MAX_ALERT_RESPONSE_BYTES = 4 << 20;
export const ALERT_REQUEST_TIMEOUT_MS = 10_000;
/** How long the alert filter may run over one answer's alerts. */
export const ALERT_FILTER_DEADLINE_MS = 2_000;
const MAX_ALERTS_READ = 10_000;
const MAX_TOKEN_BYTES = 16 << 10;

type Core = () => CoreV1Api;

export function createAlertActivities(management: KubeConfig): AlertActivities {
  const core: Core = () => apiClient(management, CoreV1Api);
  return {
    async checkAlerts(input: AlertCheckInput): Promise<AlertReport> {
      return readAlerts(core, input);
    },
    async ensureSilence(input: AlertSilenceInput): Promise<{ id: string }> {
      return ensureOwnSilence(core, input);
    },
    async expireSilences(input: AlertSilenceInput): Promise<{ expired: number }> {
      return expireOwnSilences(core, input);
    },
  };
}

/** A key of a Secret or ConfigMap; a missing one is a stable, non-retryable failure naming it (not its value). */
async function readKey(core: Core, ref: ObjectKeyRef, clusterNamespace: string, what: string): Promise<string> {
  const namespace = ref.namespace ?? clusterNamespace;
  const where = `${ref.kind} ${namespace}/${ref.name}`;
  let data: Record<string, string> | undefined;
  try {
    if (ref.kind === 'Secret') {
      const secret = await core().readNamespacedSecret({ name: ref.name, namespace });
      const raw = secret.data?.[ref.key];
      data = raw === undefined ? undefined : { [ref.key]: Buffer.from(raw, 'base64').toString('utf8') };
    } else data = (await core().readNamespacedConfigMap({ name: ref.name, namespace })).data;
  } catch (err) {
    if (isNotFound(err)) throw ApplicationFailure.nonRetryable(`${what}: ${where} not found`, 'AlertConfigMissing');
    throw err;
  }
  const value = data?.[ref.key];
  if (value === undefined || value.trim() === '')
    throw ApplicationFailure.nonRetryable(`${what}: ${where} has no key ${ref.key}`, 'AlertConfigMissing');
  return value;
}

async function httpOptions(core: Core, policy: AlertPolicy, clusterNamespace: string): Promise<AlertHttpOptions> {
  const opts: AlertHttpOptions = { timeoutMs: ALERT_REQUEST_TIMEOUT_MS, maxBytes: MAX_ALERT_RESPONSE_BYTES };
  if (policy.tokenSecret) {
    const token = (await readKey(core, policy.tokenSecret, clusterNamespace, 'alertTokenSecret')).trim();
    if (token.length > MAX_TOKEN_BYTES || /[\r\n]/.test(token))
      throw ApplicationFailure.nonRetryable(
        'alertTokenSecret: the token is not one line of at most 16 KiB',
        'AlertConfigInvalid',
      );
    opts.token = token;
  }
  if (policy.ca) opts.ca = await readKey(core, policy.ca, clusterNamespace, 'alertCa');
  return opts;
}

/** checkAlerts: the alerts that hold the upgrade, or why Prometheus could not tell. */
async function readAlerts(core: Core, input: AlertCheckInput): Promise<AlertReport> {
  const { policy, cluster } = input;
  if (!policy.prometheusUrl) return { reachable: true, firing: [], firingCount: 0 };
  const opts = await httpOptions(core, policy, cluster.namespace);
  const res = await boundedRequest(`${policy.prometheusUrl}/api/v1/alerts`, { ...opts, method: 'GET' });
  if (!res.ok) return { reachable: false, cause: res.cause };
  if (res.status !== 200) return { reachable: false, cause: `HTTP ${res.status}` };
  const alerts = prometheusAlerts(parseJson(res.body));
  if (!alerts) return { reachable: false, cause: 'the answer is not a Prometheus alerts answer' };
  let held = candidateAlerts(alerts, policy, cluster);
  if (policy.filter !== undefined && held.length > 0) {
    const matched = await matchInWorker(policy.filter, held.map(alertText));
    if (!matched)
      return {
        reachable: false,
        cause: `alertFilter took longer than ${ALERT_FILTER_DEADLINE_MS / 1000}s on ${held.length} alerts`,
      };
    held = held.filter((_, i) => matched[i]);
  }
  return { reachable: true, ...holdingNames(held) };
}

async function listSilences(input: AlertSilenceInput, opts: AlertHttpOptions): Promise<AlertmanagerSilence[]> {
  const base = alertmanagerUrl(input.policy);
  const own = silenceMatchers(input.policy, input.cluster).at(-1);
  const filter = own ? `?filter=${encodeURIComponent(`${own.name}=${JSON.stringify(own.value)}`)}` : '';
  const res = await boundedRequest(`${base}/api/v2/silences${filter}`, { ...opts, method: 'GET' });
  if (!res.ok) throw alertmanagerFailure(res.cause);
  if (res.status !== 200) throw alertmanagerFailure(`HTTP ${res.status}`);
  const parsed = parseJson(res.body);
  if (!Array.isArray(parsed)) throw alertmanagerFailure('not an Alertmanager silences answer');
  return parsed.filter(isSilence);
}

const ours = (input: AlertSilenceInput) => (s: AlertmanagerSilence) =>
  s.createdBy === SILENCE_CREATED_BY && s.comment === input.comment && s.status?.state !== 'expired';

/** ensureSilence: this step's silence, created unless a live one is there. */
async function ensureOwnSilence(core: Core, input: AlertSilenceInput): Promise<{ id: string }> {
  const opts = await httpOptions(core, input.policy, input.cluster.namespace);
  // A retry after a create whose answer was lost finds the silence instead of adding one.
  const found = (await listSilences(input, opts)).find(ours(input));
  if (found) return { id: found.id };
  const now = Date.now();
  const body = JSON.stringify({
    matchers: silenceMatchers(input.policy, input.cluster),
    startsAt: new Date(now).toISOString(),
    endsAt: new Date(now + input.policy.silenceDurationMs).toISOString(),
    createdBy: SILENCE_CREATED_BY,
    comment: input.comment,
  });
  const res = await boundedRequest(`${alertmanagerUrl(input.policy)}/api/v2/silences`, {
    ...opts,
    method: 'POST',
    body,
  });
  if (!res.ok) throw alertmanagerFailure(res.cause);
  if (res.status !== 200) throw alertmanagerFailure(`HTTP ${res.status}`);
  const id = (parseJson(res.body) as { silenceID?: unknown } | undefined)?.silenceID;
  if (typeof id !== 'string') throw alertmanagerFailure('not an Alertmanager silence answer');
  return { id };
}

/** expireSilences: this step's live silences, expired. */
async function expireOwnSilences(core: Core, input: AlertSilenceInput): Promise<{ expired: number }> {
  const opts = await httpOptions(core, input.policy, input.cluster.namespace);
  let expired = 0;
  for (const s of (await listSilences(input, opts)).filter(ours(input))) {
    const res = await boundedRequest(`${alertmanagerUrl(input.policy)}/api/v2/silence/${encodeURIComponent(s.id)}`, {
      ...opts,
      method: 'DELETE',
    });
    if (!res.ok) throw alertmanagerFailure(res.cause);
    // 404: gone already (another try expired it).
    if (res.status !== 200 && res.status !== 404) throw alertmanagerFailure(`HTTP ${res.status}`);
    expired++;
  }
  return { expired };
}

interface AlertmanagerSilence {
  id: string;
  createdBy?: string;
  comment?: string;
  status?: { state?: string };
}

function isSilence(v: unknown): v is AlertmanagerSilence {
  return typeof v === 'object' && v !== null && typeof (v as { id?: unknown }).id === 'string';
}

function alertmanagerUrl(policy: AlertPolicy): string {
  if (!policy.alertmanagerUrl) throw ApplicationFailure.nonRetryable('no alertmanagerUrl is set', 'AlertConfigMissing');
  return policy.alertmanagerUrl;
}

function alertmanagerFailure(cause: string): ApplicationFailure {
  return ApplicationFailure.retryable(`Alertmanager: ${cause}`, 'AlertmanagerUnavailable');
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

/** `{status:"success", data:{alerts:[{labels, state}]}}` → the alerts; undefined when it is not that. */
export function prometheusAlerts(body: unknown): PrometheusAlert[] | undefined {
  const data = (body as { status?: unknown; data?: { alerts?: unknown } } | undefined) ?? {};
  if (data.status !== 'success' || !Array.isArray(data.data?.alerts)) return undefined;
  const out: PrometheusAlert[] = [];
  for (const a of (data.data.alerts as unknown[]).slice(0, MAX_ALERTS_READ)) {
    const { labels, state } = (a ?? {}) as { labels?: unknown; state?: unknown };
    if (typeof labels !== 'object' || labels === null || typeof state !== 'string') continue;
    const strings = Object.entries(labels).filter((e): e is [string, string] => typeof e[1] === 'string');
    out.push({ labels: Object.fromEntries(strings), state });
  }
  return out;
}

// A worker thread runs the filter: a pattern that backtracks for long is stopped at the deadline
// instead of blocking the activity worker's event loop (and every other activity with it).
const FILTER_WORKER = `
const { parentPort, workerData } = require('node:worker_threads');
const re = new RegExp(workerData.pattern, 'u');
parentPort.postMessage(workerData.texts.map((t) => re.test(t)));
`;

/** Which texts match; undefined when the deadline passed first. */
export async function matchInWorker(
  pattern: string,
  texts: string[],
  deadlineMs = ALERT_FILTER_DEADLINE_MS,
): Promise<boolean[] | undefined> {
  const worker = new Worker(FILTER_WORKER, { eval: true, workerData: { pattern, texts } });
  try {
    return await new Promise<boolean[] | undefined>((resolve, reject) => {
      const timer = setTimeout(() => resolve(undefined), deadlineMs);
      worker.once('message', (m: boolean[]) => {
        clearTimeout(timer);
        resolve(m);
      });
      worker.once('error', (err) => {
        clearTimeout(timer);
        reject(err);
      });
    });
  } finally {
    await worker.terminate();
  }
}

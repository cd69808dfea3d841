// Errors with stable messages. A failure's message reaches CAPI conditions (through a workflow,
// or straight from the api's answers), so it must be deterministic for a given cause and carry no
// internals: @kubernetes/client-node's ApiException message embeds the raw response (headers such
// as `Date:`, the whole body), which is neither.
import { STATUS_CODES } from 'node:http';
import { ApiException } from '@kubernetes/client-node';
import { truncate } from '../../domain/strings.ts';
import { KubeError } from './errors.ts';
import { WorkloadReadError } from './workload-limits.ts';

/** Longest failure message produced here (CAPI truncates error bodies to 512 characters anyway). */
export const MAX_FAILURE_MESSAGE = 300;

/** Failure type of an unreachable API server (always retryable). */
export const KUBERNETES_API_UNREACHABLE = 'KubernetesApiUnreachable';

/** Answers a retry cannot change: the request itself is wrong, or refused for good. */
const NON_RETRYABLE_STATUS = new Set([400, 401, 403, 404, 422]);

/** Error codes of a connection that failed or broke (Node's net/dns, and undici's own). */
const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'ENOTFOUND',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EAI_AGAIN',
  'EPIPE',
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_SOCKET',
]);
const NETWORK_MESSAGES = ['socket hang up', 'fetch failed'];

/**
 * `err` as a {@link KubeError} whose message is stable for a given cause. A KubeError is already
 * deliberate and is returned as is. The original error is not attached as the cause: its message
 * is exactly what must not travel.
 */
export function stableError(err: unknown): KubeError {
  if (err instanceof KubeError) return err;
  if (err instanceof ApiException) return apiError(err.code, err.body);
  if (err instanceof WorkloadReadError) return new KubeError(clip(err.message), err.name, { retryable: err.retryable });
  // JSON.parse's message quotes the answer it choked on: the server's words, not ours.
  if (err instanceof SyntaxError && err.message.includes('JSON'))
    return retryable('the Kubernetes API answered with malformed JSON', 'KubernetesApiMalformed');
  const network = networkFailure(err);
  if (network) {
    const where = network.where ? ` at ${network.where}` : '';
    return retryable(clip(`cannot reach the Kubernetes API${where}: ${network.code}`), KUBERNETES_API_UNREACHABLE);
  }
  const name = err instanceof Error ? err.name || 'Error' : 'Error';
  const message = err instanceof Error ? err.message : String(err);
  const firstLine = message.split('\n', 1)[0]?.trim() ?? '';
  return retryable(clip(firstLine ? `${name}: ${firstLine}` : name), name);
}

function retryable(message: string, type: string): KubeError {
  return new KubeError(message, type, { retryable: true });
}

function apiError(code: number, body: unknown): KubeError {
  const status = kubernetesStatus(body);
  const reason = status?.reason || STATUS_CODES[code] || '';
  const detail = status?.message ? `: ${oneLine(status.message)}` : '';
  const message = clip(`Kubernetes API answered HTTP ${code}${reason ? ` ${reason}` : ''}${detail}`);
  return new KubeError(message, `KubernetesApi${code}`, { retryable: !NON_RETRYABLE_STATUS.has(code) });
}

/** The reason and message of a Kubernetes `Status` answer; the client hands the body over as text. */
function kubernetesStatus(body: unknown): { reason?: string; message?: string } | undefined {
  let parsed: unknown = body;
  if (typeof body === 'string') {
    try {
      parsed = JSON.parse(body);
    } catch {
      return undefined; // not JSON (a proxy's HTML page, say): the status code says enough
    }
  }
  if (!isRecord(parsed) || parsed.kind !== 'Status') return undefined;
  return {
    ...(typeof parsed.reason === 'string' ? { reason: parsed.reason } : {}),
    ...(typeof parsed.message === 'string' ? { message: parsed.message } : {}),
  };
}

/** A network-level failure found on `err` or its causes: the code, and the address when known. */
function networkFailure(err: unknown): { code: string; where?: string } | undefined {
  let fallback: string | undefined;
  const seen = new Set<unknown>();
  const queue: unknown[] = [err];
  while (queue.length > 0) {
    const e = queue.shift();
    if (!isRecord(e) || seen.has(e)) continue;
    seen.add(e);
    if (typeof e.code === 'string' && NETWORK_CODES.has(e.code)) {
      // Node's happy-eyeballs connect fails with an AggregateError carrying the per-address errors.
      const at = [e, ...(Array.isArray(e.errors) ? e.errors : [])].map(address).find(Boolean);
      return { code: e.code, ...(at ? { where: at } : {}) };
    }
    const message = typeof e.message === 'string' ? e.message : '';
    if (!fallback && NETWORK_MESSAGES.includes(message)) fallback = message;
    queue.push(e.cause, ...(Array.isArray(e.errors) ? e.errors : []));
  }
  return fallback ? { code: fallback } : undefined;
}

function address(e: unknown): string | undefined {
  if (!isRecord(e)) return undefined;
  const host = typeof e.address === 'string' ? e.address : typeof e.hostname === 'string' ? e.hostname : undefined;
  if (!host) return undefined;
  const shown = host.includes(':') ? `[${host}]` : host; // IPv6
  return typeof e.port === 'number' ? `${shown}:${e.port}` : shown;
}

function oneLine(text: string): string {
  return text.replace(/\s+/g, ' ').trim();
}

function clip(text: string): string {
  return truncate(text, MAX_FAILURE_MESSAGE);
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null;
}

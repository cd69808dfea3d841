// stableFailure: activity failure messages reach CAPI conditions, so they must
// be the same for the same cause (no Date header, no response dump) and say
// whether a retry can help.
import { describe, expect, it } from '@jest/globals';
import { ApiException } from '@kubernetes/client-node';
import { ApplicationFailure, CancelledFailure } from '@temporalio/common';
import { deliberateFailure, stableFailure, withStableFailures } from '../../src/activities/failures.ts';
import { KubeError } from '../../src/platform/kube/errors.ts';
import { KUBERNETES_API_UNREACHABLE, MAX_FAILURE_MESSAGE } from '../../src/platform/kube/stable-error.ts';

/** What client-node 2.x throws for a non-2xx answer: the body as text, every response header. */
function apiException(code: number, body: unknown, date = 'Tue, 03 Jun 2025 10:00:00 GMT'): ApiException<unknown> {
  return new ApiException(code, 'Unknown API Status Code!', typeof body === 'string' ? body : JSON.stringify(body), {
    'audit-id': '5b1e0c1e-8a43-4b0c-9a8e-2f1d7c3b9e11',
    'content-type': 'application/json',
    date,
  });
}

function status(code: number, reason: string, message: string) {
  return { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason, code };
}

/** An error like Node's for a refused connection, as undici's fetch wraps it. */
function fetchFailed(cause: Record<string, unknown>): TypeError {
  return new TypeError('fetch failed', { cause: Object.assign(new Error(String(cause.code)), cause) });
}

describe('stableFailure: Kubernetes API answers', () => {
  it('states the code, reason and Status message; no headers and no body', () => {
    const err = apiException(404, status(404, 'NotFound', 'clusters.cluster.x-k8s.io "prod" not found'));
    // The raw message is what must not travel: it carries the Date header and the body.
    expect(err.message).toContain('Tue, 03 Jun 2025');
    const failure = stableFailure(err);
    expect(failure).toBeInstanceOf(ApplicationFailure);
    expect(failure.message).toBe(
      'Kubernetes API answered HTTP 404 NotFound: clusters.cluster.x-k8s.io "prod" not found',
    );
    expect(failure.message).not.toMatch(/Date|GMT|audit-id|Headers|Body|"kind"/i);
    expect(failure.cause).toBeUndefined();
  });

  it('gives identical messages for errors that differ only in the Date header', () => {
    const body = status(500, 'InternalError', 'etcdserver: request timed out');
    const a = stableFailure(apiException(500, body, 'Tue, 03 Jun 2025 10:00:00 GMT'));
    const b = stableFailure(apiException(500, body, 'Wed, 04 Jun 2025 23:59:59 GMT'));
    expect(a.message).toBe('Kubernetes API answered HTTP 500 InternalError: etcdserver: request timed out');
    expect(b.message).toBe(a.message);
    expect(b.type).toBe(a.type);
  });

  it.each([400, 401, 403, 404, 422])('%i is non-retryable, typed KubernetesApi<code>', (code) => {
    const failure = stableFailure(apiException(code, status(code, 'Refused', 'no')));
    expect(failure).toMatchObject({ nonRetryable: true, type: `KubernetesApi${code}` });
  });

  it.each([409, 429, 500, 503])('%i is retryable', (code) => {
    const failure = stableFailure(apiException(code, status(code, 'Busy', 'try again')));
    expect(failure).toMatchObject({ nonRetryable: false, type: `KubernetesApi${code}` });
  });

  it('falls back to the HTTP reason phrase when the body is no Status (401 has no body at all)', () => {
    expect(stableFailure(new ApiException(401, 'Unauthorized', undefined, { date: 'now' })).message).toBe(
      'Kubernetes API answered HTTP 401 Unauthorized',
    );
    expect(stableFailure(apiException(502, '<html><body>Bad Gateway at 10:00:00</body></html>')).message).toBe(
      'Kubernetes API answered HTTP 502 Bad Gateway',
    );
    expect(stableFailure(apiException(500, { kind: 'Pod', message: 'not a status' })).message).toBe(
      'Kubernetes API answered HTTP 500 Internal Server Error',
    );
  });

  it('accepts a body already parsed, puts a multi-line Status message on one line, and truncates to 300', () => {
    const parsed = new ApiException(422, 'x', status(422, 'Invalid', 'spec.replicas:\n  Invalid value: -1'), {});
    expect(stableFailure(parsed).message).toBe(
      'Kubernetes API answered HTTP 422 Invalid: spec.replicas: Invalid value: -1',
    );
    const long = stableFailure(apiException(500, status(500, 'InternalError', 'x'.repeat(1000)))).message;
    expect([...long]).toHaveLength(MAX_FAILURE_MESSAGE);
    expect(long.endsWith('…')).toBe(true);
  });
});

describe('stableFailure: network errors', () => {
  it('names the address and the code of a refused connection, retryable', () => {
    const err = fetchFailed({ code: 'ECONNREFUSED', syscall: 'connect', address: '127.0.0.1', port: 6443 });
    expect(stableFailure(err)).toMatchObject({
      message: 'cannot reach the Kubernetes API at 127.0.0.1:6443: ECONNREFUSED',
      type: KUBERNETES_API_UNREACHABLE,
      nonRetryable: false,
    });
  });

  it('finds the code on the error itself, in an AggregateError of addresses, and names a host it could not resolve', () => {
    expect(stableFailure(Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' })).message).toBe(
      'cannot reach the Kubernetes API: ECONNRESET',
    );
    const both = Object.assign(
      new AggregateError([
        Object.assign(new Error('a'), { code: 'ECONNREFUSED', address: '::1', port: 6443 }),
        Object.assign(new Error('b'), { code: 'ECONNREFUSED', address: '127.0.0.1', port: 6443 }),
      ]),
      { code: 'ECONNREFUSED' },
    );
    expect(stableFailure(new TypeError('fetch failed', { cause: both })).message).toBe(
      'cannot reach the Kubernetes API at [::1]:6443: ECONNREFUSED',
    );
    expect(stableFailure(fetchFailed({ code: 'ENOTFOUND', hostname: 'api.example.invalid' })).message).toBe(
      'cannot reach the Kubernetes API at api.example.invalid: ENOTFOUND',
    );
    for (const code of ['ETIMEDOUT', 'EHOSTUNREACH']) {
      expect(stableFailure(fetchFailed({ code, address: '10.0.0.1', port: 443 })).message).toBe(
        `cannot reach the Kubernetes API at 10.0.0.1:443: ${code}`,
      );
    }
  });

  it('recognises "socket hang up" and a bare "fetch failed" without a code', () => {
    expect(stableFailure(new Error('socket hang up')).message).toBe('cannot reach the Kubernetes API: socket hang up');
    expect(stableFailure(new TypeError('fetch failed')).message).toBe('cannot reach the Kubernetes API: fetch failed');
  });
});

describe('stableFailure: anything else', () => {
  it('keeps an ApplicationFailure as it is', () => {
    const deliberate = ApplicationFailure.nonRetryable('Cluster ns/prod not found', 'ClusterNotFound');
    expect(stableFailure(deliberate)).toBe(deliberate);
  });

  it('is the name and the first line of the message, retryable, typed by the name', () => {
    const failure = stableFailure(new RangeError('bad value\n    at somewhere (file.ts:1:1)'));
    expect(failure).toMatchObject({ message: 'RangeError: bad value', type: 'RangeError', nonRetryable: false });
    expect(stableFailure('a string').message).toBe('Error: a string');
    expect([...stableFailure(new Error('y'.repeat(400))).message]).toHaveLength(MAX_FAILURE_MESSAGE);
  });
});

describe('the platform errors at the activity edge', () => {
  const refused = KubeError.nonRetryable('Secret ns/c-kubeconfig has no key "value"', 'WorkloadKubeconfigMissing');

  it('a KubeError keeps its message and type, and says whether a retry helps', () => {
    const failure = stableFailure(refused);
    expect(failure).toBeInstanceOf(ApplicationFailure);
    expect(failure).toMatchObject({ message: refused.message, type: 'WorkloadKubeconfigMissing', nonRetryable: true });
    expect(stableFailure(new KubeError('busy', 'Busy', { retryable: true }))).toMatchObject({ nonRetryable: false });
  });

  it('deliberateFailure: an ApplicationFailure or a KubeError, nothing else', () => {
    const own = ApplicationFailure.nonRetryable('refused', 'Refused');
    expect(deliberateFailure(own)).toBe(own);
    expect(deliberateFailure(refused)).toMatchObject({ type: 'WorkloadKubeconfigMissing', nonRetryable: true });
    expect(deliberateFailure(apiException(500, 'oops'))).toBeUndefined();
    expect(deliberateFailure(new Error('bug'))).toBeUndefined();
  });
});

describe('withStableFailures', () => {
  const activities = withStableFailures({
    async ok(n: number): Promise<number> {
      return n + 1;
    },
    async api(): Promise<void> {
      throw apiException(403, status(403, 'Forbidden', 'no access'));
    },
    async cancelled(): Promise<void> {
      throw new CancelledFailure('CANCELLED');
    },
  });

  it('returns results untouched and turns thrown errors into stable failures', async () => {
    expect(await activities.ok(1)).toBe(2);
    await expect(activities.api()).rejects.toMatchObject({
      message: 'Kubernetes API answered HTTP 403 Forbidden: no access',
      type: 'KubernetesApi403',
      nonRetryable: true,
    });
  });

  it('lets a cancellation through: the worker reports the activity cancelled by its class', async () => {
    await expect(activities.cancelled()).rejects.toBeInstanceOf(CancelledFailure);
  });

  it('keeps the function names', () => {
    expect(Object.keys(activities)).toEqual(['ok', 'api', 'cancelled']);
    expect(activities.ok.name).toBe('ok');
  });
});

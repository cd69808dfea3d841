// The HTTP transport of every API client made for a workload cluster. client-node's
// own (undici's fetch) reads an answer whole, follows redirects, inflates gzip
// it asked for by default and has no deadline: one hostile API server could fill
// the heap or hold a socket for ever. Here an answer is taken only when it is
// a whole, unencoded, not redirected answer within the byte, JSON-item and time
// limits (workload-limits.ts), read in a slot of the process's ReadGate, and
// identical GETs in flight at once share one request.
import {
  ResponseContext,
  wrapHttpLibrary,
  type HttpLibrary,
  type PromiseHttpLibrary,
  type RequestContext,
} from '@kubernetes/client-node';
import { request, type Dispatcher } from 'undici';
import { measureJson } from '../../domain/json-bounds.ts';
import { currentReadScope } from './read-scope.ts';
import type { ReadGate } from './read-gate.ts';
import { WORKLOAD_LIMIT_SETTING as SETTING, WorkloadReadError, type WorkloadReadLimits } from './workload-limits.ts';

interface Answer {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
}

/** One request in flight and the callers waiting for it; the last caller to leave aborts it. */
interface SharedRead {
  done: Promise<Answer>;
  settled: boolean;
  /** Aborted: a caller arriving now starts a new request. */
  signal: AbortSignal;
  users: number;
  abort(): void;
}

/** A header value a hostile server chose, fit to quote: a short token, or nothing. */
function token(value: string | undefined): string {
  return value !== undefined && /^[A-Za-z0-9.+/-]{1,40}$/.test(value) ? `"${value}"` : 'an unexpected value';
}

function headerText(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value.join(', ') : value;
}

function mediaType(contentType: string | undefined): string | undefined {
  return contentType?.split(';', 1)[0]?.trim().toLowerCase();
}

function isJsonType(contentType: string | undefined): boolean {
  const media = mediaType(contentType);
  return media === 'application/json' || (media?.startsWith('application/') === true && media.endsWith('+json'));
}

/** What an API server answers a successful call with: JSON, or text for a container's log. */
function isExpectedType(contentType: string | undefined): boolean {
  return isJsonType(contentType) || mediaType(contentType) === 'text/plain';
}

export class BoundedTransport implements PromiseHttpLibrary {
  private readonly shared = new Map<string, SharedRead>();

  /** `namespace/name` of the workload cluster, for messages and its slots. */
  private readonly cluster: string;
  private readonly limits: WorkloadReadLimits;
  private readonly gate: ReadGate;

  constructor(cluster: string, limits: WorkloadReadLimits, gate: ReadGate) {
    this.cluster = cluster;
    this.limits = limits;
    this.gate = gate;
  }

  /** This transport in the Observable form client-node's configuration takes. */
  asHttpLibrary(): HttpLibrary {
    return wrapHttpLibrary(this);
  }

  /** Requests in flight (shared ones once). */
  get inFlight(): number {
    return this.shared.size;
  }

  async send(req: RequestContext): Promise<ResponseContext> {
    const what = `${req.getHttpMethod()} ${new URL(req.getUrl()).pathname}`;
    const scope = currentReadScope();
    const timeoutMs = Math.min(scope?.timeoutMs ?? this.limits.timeoutMs, this.limits.timeoutMs);
    const key = req.getHttpMethod() === 'GET' ? req.getUrl() : undefined;
    let read = key === undefined ? undefined : this.shared.get(key);
    if (!read || read.signal.aborted) {
      const started = this.start(req, what);
      read = started;
      if (key !== undefined) {
        this.shared.set(key, started);
        void started.done.then(
          () => this.shared.get(key) === started && this.shared.delete(key),
          () => this.shared.get(key) === started && this.shared.delete(key),
        );
      }
    }
    read.users++;
    try {
      const answer = await this.wait(read.done, what, timeoutMs, scope?.signal);
      return new ResponseContext(answer.status, answer.headers, {
        text: () => Promise.resolve(answer.body.toString('utf8')),
        binary: () => Promise.resolve(answer.body),
        stream: () => new Blob([answer.body]).stream(),
      });
    } finally {
      if (--read.users === 0 && !read.settled) read.abort();
    }
  }

  private refusal(what: string, reason: ConstructorParameters<typeof WorkloadReadError>[0], detail: string) {
    return new WorkloadReadError(reason, `workload cluster ${this.cluster}: ${what}: ${detail}`);
  }

  private timeout(what: string, ms: number): WorkloadReadError {
    return this.refusal(what, 'timeout', `no whole answer within ${Math.round(ms / 100) / 10}s (${SETTING.timeoutMs})`);
  }

  /** The caller's wait: the shared answer, unless its own deadline passes or it stops waiting first. */
  private async wait(done: Promise<Answer>, what: string, ms: number, signal?: AbortSignal): Promise<Answer> {
    let timer: NodeJS.Timeout | undefined;
    let onAbort: (() => void) | undefined;
    try {
      return await Promise.race([
        done,
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(this.timeout(what, ms)), ms);
          if (signal) {
            onAbort = () => reject(signal.reason as Error);
            if (signal.aborted) onAbort();
            else signal.addEventListener('abort', onAbort, { once: true });
          }
        }),
      ]);
    } finally {
      clearTimeout(timer);
      if (signal && onAbort) signal.removeEventListener('abort', onAbort);
    }
  }

  private start(req: RequestContext, what: string): SharedRead {
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(this.timeout(what, this.limits.timeoutMs)), this.limits.timeoutMs);
    timer.unref();
    const read: SharedRead = {
      settled: false,
      signal: controller.signal,
      users: 0,
      abort: () => controller.abort(this.refusal(what, 'timeout', 'every caller stopped waiting')),
      done: this.read(req, what, controller.signal).finally(() => {
        read.settled = true;
        clearTimeout(timer);
      }),
    };
    // The callers handle the rejection; this only keeps an unwatched one from being reported unhandled.
    read.done.catch(() => undefined);
    return read;
  }

  private async read(req: RequestContext, what: string, signal: AbortSignal): Promise<Answer> {
    const leave = await this.gate.enter(this.cluster, signal);
    let charged = 0;
    let body: Dispatcher.ResponseData['body'] | undefined;
    try {
      const headers: Record<string, string> = { ...req.getHeaders(), 'accept-encoding': 'identity' };
      const sent = req.getBody();
      const res = await request(req.getUrl(), {
        method: req.getHttpMethod() as Dispatcher.HttpMethod,
        headers,
        ...(typeof sent === 'string' ? { body: sent } : {}),
        ...(req.getDispatcher() ? { dispatcher: req.getDispatcher() as Dispatcher } : {}),
        signal,
      });
      body = res.body;
      // Destroying a body nobody read emits an error: it is ours, not news.
      body.on('error', () => undefined);
      const head = this.checkHead(what, res.statusCode, res.headers);
      const chunks: Buffer[] = [];
      let bytes = 0;
      for await (const chunk of res.body as AsyncIterable<Buffer>) {
        bytes += chunk.length;
        if (bytes > this.limits.maxResponseBytes)
          throw this.refusal(
            what,
            'too-large',
            `answer larger than ${this.limits.maxResponseBytes} bytes (${SETTING.maxResponseBytes})`,
          );
        if (!this.gate.budget.charge(this.cluster, chunk.length))
          throw this.refusal(
            what,
            'busy',
            `answers being read from workload clusters are at the ${this.limits.budgetBytes}-byte budget (${SETTING.budgetBytes}); try again`,
          );
        charged += chunk.length;
        chunks.push(chunk);
      }
      const answer = { status: res.statusCode, headers: head, body: Buffer.concat(chunks, bytes) };
      this.checkJson(what, answer);
      return answer;
    } catch (err) {
      body?.destroy();
      // An abort surfaces as undici's own error: report why the read was stopped instead.
      if (signal.aborted) throw signal.reason as Error;
      throw err;
    } finally {
      leave();
      // Held until the callers have parsed the answer: they do so in the microtasks that follow.
      const bytes = charged;
      if (bytes > 0) setImmediate(() => this.gate.budget.release(this.cluster, bytes));
    }
  }

  /** Refuses a redirect, an encoding not asked for, an over-long declared length or a success that is not JSON. */
  private checkHead(what: string, status: number, raw: Record<string, string | string[] | undefined>) {
    const headers: Record<string, string> = {};
    for (const [name, value] of Object.entries(raw)) {
      const text = headerText(value);
      if (text !== undefined) headers[name.toLowerCase()] = text;
    }
    if (status >= 300 && status < 400)
      throw this.refusal(what, 'redirect', `answered a redirect (HTTP ${status}), which is not followed`);
    const encoding = headers['content-encoding']?.trim().toLowerCase();
    if (encoding && encoding !== 'identity')
      throw this.refusal(
        what,
        'encoding',
        `answered with Content-Encoding ${token(encoding)}, which was not asked for`,
      );
    const length = Number(headers['content-length']);
    if (Number.isFinite(length) && length > this.limits.maxResponseBytes)
      throw this.refusal(
        what,
        'too-large',
        `answer larger than ${this.limits.maxResponseBytes} bytes (${SETTING.maxResponseBytes})`,
      );
    if (status >= 200 && status < 300 && status !== 204 && !isExpectedType(headers['content-type']))
      throw this.refusal(
        what,
        'content-type',
        `answered HTTP ${status} with Content-Type ${token(mediaType(headers['content-type']))}, not JSON`,
      );
    return headers;
  }

  /** What parsing the answer would build, bounded before anything parses it. */
  private checkJson(what: string, answer: Answer): void {
    if (!isJsonType(answer.headers['content-type'])) return;
    const measured = measureJson(answer.body, {
      maxItems: this.limits.maxJsonItems,
      maxDepth: this.limits.maxJsonDepth,
    });
    if (measured.exceeded === 'maxItems')
      throw this.refusal(
        what,
        'too-many-items',
        `answer holds more than ${this.limits.maxJsonItems} JSON items (${SETTING.maxJsonItems})`,
      );
    if (measured.exceeded === 'maxDepth')
      throw this.refusal(
        what,
        'too-many-items',
        `answer nests objects and arrays more than ${this.limits.maxJsonDepth} deep (${SETTING.maxJsonDepth})`,
      );
  }
}

// The one generic layer every hook goes through: route, schema validation,
// deadline from `?timeout=`, the response envelope (apiVersion, kind, an
// integer retryAfterSeconds on retry hooks), how outages and bugs are
// answered, and one log line per call. A hook's own code is only the
// implementation function.
import { hookRequestDuration, type HookAnswer } from '../../ops/metrics.ts';
import type { TLSSocket } from 'node:tls';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { HandlerConfig } from '../../config/server.ts';
import {
  HOOKS_API_VERSION,
  HOOKS_PATH_PREFIX,
  hookCatalog,
  requestSchema,
  type HookName,
  type HookRequest,
  type HookResponse,
  type HookResult,
} from './contract.ts';
import { capiMessage } from '../../model/cluster-upgrade.ts';
import { hookBudgetMs, parseGoDuration } from '../http/deadline.ts';
import { BackendUnavailable, HookFailure, HttpError } from './errors.ts';
import type { HookRegistry } from './registry.ts';
import { bodyBytesOf } from '../http/body-budget.ts';

export interface HookContext {
  hook: HookName;
  handler: HandlerConfig;
  /** ExtensionConfig spec.settings as CAPI sent them. */
  settings: Readonly<Record<string, string>>;
  /** Aborted when the hook's budget runs out; pass it to every backend call. */
  signal: AbortSignal;
  /** Epoch milliseconds by which the answer must be on its way. */
  deadline: number;
  log: FastifyRequest['log'];
  /** The caller's client certificate subject (CN, else its first subjectAltName); undefined without one. */
  caller?: string;
}

export type HookImplementation<H extends HookName> = (
  request: HookRequest<H>,
  ctx: HookContext,
) => Promise<HookResult<H>>;

export interface HookRouteOptions {
  registry: HookRegistry;
  /** retryAfterSeconds for blocking hooks while the backend is unavailable. */
  unavailableRetryAfterSeconds: number;
}

/** The `?timeout=` CAPI may send: discovery's timeoutSeconds is 1–30 s. */
const MIN_TIMEOUT_MS = 1_000;
const MAX_TIMEOUT_MS = 30_000;

export const UNAVAILABLE_MESSAGE = 'orchestrator unavailable: the workflow service did not answer in time; will retry';

export function hookPath(hook: HookName, handlerName: string): string {
  return `${HOOKS_PATH_PREFIX}/${hook.toLowerCase()}/${handlerName.toLowerCase()}`;
}

/** Answers every method but POST on `url` with 405 and an Allow header. */
export function registerMethodNotAllowed(app: FastifyInstance, url: string): void {
  app.route({
    method: ['GET', 'PUT', 'DELETE', 'PATCH', 'OPTIONS'],
    url,
    handler: async (_req, reply) => {
      void reply.header('allow', 'POST');
      throw new HttpError(405, `method not allowed: ${url} accepts POST only`);
    },
  });
}

/** Registers `impl` for `hook` unless configuration switched the hook off. */
export function registerHook<H extends HookName>(
  app: FastifyInstance,
  options: HookRouteOptions,
  hook: H,
  impl: HookImplementation<H>,
): void {
  const handler = options.registry.handler(hook);
  if (!handler) return;
  const url = hookPath(hook, handler.name);
  const spec = hookCatalog[hook];
  const retry = spec.shape === 'retry';
  const envelope = (result: { status: 'Success' | 'Failure'; message?: string; retryAfterSeconds?: number }) =>
    ({
      apiVersion: HOOKS_API_VERSION,
      kind: `${hook}Response`,
      ...result,
      ...(result.message !== undefined ? { message: capiMessage(result.message) } : {}),
      ...(retry ? { retryAfterSeconds: Math.max(0, Math.trunc(result.retryAfterSeconds ?? 0)) } : {}),
    }) as HookResponse<H>;

  app.route({
    method: 'POST',
    url,
    schema: { body: requestSchema(hook) },
    handler: async (request: FastifyRequest, reply: FastifyReply) => {
      const started = performance.now();
      const body = request.body as HookRequest<H>;
      const timeoutParam = (request.query as Record<string, unknown>).timeout;
      let callerTimeoutMs = (handler.timeoutSeconds || 10) * 1000;
      if (typeof timeoutParam === 'string') {
        const parsed = parseGoDuration(timeoutParam);
        if (parsed === undefined)
          throw new HttpError(
            400,
            `query parameter timeout=${JSON.stringify(timeoutParam)} is not a Go duration`,
            'timeout',
          );
        // CAPI's timeoutSeconds is 1–30 s; anything else (and timers past 2^31 ms) is clamped into it.
        callerTimeoutMs = Math.min(MAX_TIMEOUT_MS, Math.max(MIN_TIMEOUT_MS, parsed));
      }
      const budget = hookBudgetMs(callerTimeoutMs);
      const controller = new AbortController();
      const ctx: HookContext = {
        hook,
        handler,
        settings: (body as { settings?: Record<string, string> }).settings ?? {},
        signal: controller.signal,
        deadline: Date.now() + budget,
        log: request.log,
        ...callerOf(request),
      };
      let timer: NodeJS.Timeout | undefined;
      const deadlineReached = new Promise<never>((_, reject) => {
        timer = setTimeout(() => {
          controller.abort();
          reject(new BackendUnavailable());
        }, budget);
      });
      let response: HookResponse<H>;
      let outcome: string;
      try {
        response = envelope(await Promise.race([impl(body, ctx), deadlineReached]));
        outcome = response.status;
      } catch (err) {
        if (err instanceof HttpError) throw err;
        if (err instanceof HookFailure) {
          response = envelope({ status: 'Failure', message: err.message });
          outcome = 'Failure';
        } else if (err instanceof BackendUnavailable) {
          // Never let CAPI proceed on unknown state: blocking hooks hold it back.
          response = spec.blocking
            ? envelope({
                status: 'Success',
                message: err.capiMessage ?? UNAVAILABLE_MESSAGE,
                retryAfterSeconds: options.unavailableRetryAfterSeconds,
              })
            : envelope({ status: 'Failure', message: err.capiMessage ?? UNAVAILABLE_MESSAGE });
          outcome = 'BackendUnavailable';
          request.log.warn({ hook, reason: err.message }, 'backend unavailable');
        } else {
          request.log.error({ hook, err }, 'hook implementation failed');
          response = envelope({
            status: 'Failure',
            message: `internal error in the ${hook} handler; see the extension logs`,
          });
          outcome = 'InternalError';
        }
      } finally {
        clearTimeout(timer);
      }
      const retryAfter = (response as { retryAfterSeconds?: number }).retryAfterSeconds ?? 0;
      const answer: HookAnswer = response.status === 'Failure' ? 'failure' : retryAfter > 0 ? 'retry' : 'success';
      hookRequestDuration.observe({ hook, answer }, (performance.now() - started) / 1000);
      request.log.info(
        {
          hook,
          handler: handler.name,
          subject: subjectOf(body as SubjectCarrier),
          version: versionOf(body as SubjectCarrier),
          outcome,
          status: response.status,
          // Messages are deterministic and carry no secrets (CAPI copies them into conditions).
          message: response.message,
          retryAfterSeconds: (response as { retryAfterSeconds?: number }).retryAfterSeconds,
          durationMs: Math.round(performance.now() - started),
          bodyBytes: bodyBytesOf(request),
        },
        'hook answered',
      );
      return reply.code(200).send(response);
    },
  });
  registerMethodNotAllowed(app, url);
}

/** Each connection's caller, read once (CAPI keeps its connections alive). */
const callers = new WeakMap<object, string | undefined>();

/** `{caller}` from the TLS peer certificate: its CN, else its first subjectAltName; nothing on plain HTTP. */
function callerOf(request: FastifyRequest): { caller?: string } {
  const socket = request.socket as Partial<TLSSocket>;
  if (typeof socket.getPeerCertificate !== 'function') return {};
  let name: string | undefined;
  if (callers.has(socket)) name = callers.get(socket);
  else {
    const cert = socket.getPeerCertificate();
    const cn = cert?.subject?.CN;
    name = (Array.isArray(cn) ? cn[0] : cn) || cert?.subjectaltname?.split(',')[0]?.trim() || undefined;
    callers.set(socket, name);
  }
  return name ? { caller: name } : {};
}

interface ObjectWithMeta {
  metadata?: { namespace?: string; name?: string };
}
interface SubjectCarrier {
  cluster?: ObjectWithMeta;
  toKubernetesVersion?: string;
  kubernetesVersion?: string;
  desired?: { machine?: ObjectWithMeta; machineSet?: ObjectWithMeta };
}

/** `namespace/name` of the object a call is about, for logs. */
function subjectOf(body: SubjectCarrier): string | undefined {
  const meta = body.cluster?.metadata ?? body.desired?.machine?.metadata ?? body.desired?.machineSet?.metadata;
  return meta ? `${meta.namespace}/${meta.name}` : undefined;
}

/** The Kubernetes version a lifecycle call is about (the step's target, or the version reached). */
function versionOf(body: SubjectCarrier): string | undefined {
  return body.toKubernetesVersion ?? body.kubernetesVersion;
}

// The one generic layer every hook goes through: route, schema validation,
// deadline from `?timeout=`, the response envelope (apiVersion, kind, an
// integer retryAfterSeconds on retry hooks), how outages and bugs are
// answered, and one log line per call. A hook's own code is only the
// implementation function.
import { hookRequestDuration, type HookAnswer } from '../../ops/metrics.ts';
import { Type, type Static } from 'typebox';
import type { FastifyInstance, FastifyRequest } from 'fastify';
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
import { peerIdentity, subjectName } from '../http/caller.ts';
import type { TypeBoxTypeProvider } from './type-provider.ts';

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

/**
 * The query string a hook route reads. A key given twice arrives as an array and is ignored, as
 * before the query had a schema: the union accepts whatever the query parser produces.
 */
const HookQuerySchema = Type.Object({
  timeout: Type.Optional(Type.Union([Type.String(), Type.Array(Type.String())])),
});
type HookQuery = Static<typeof HookQuerySchema>;

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

/** How long the caller waits: `?timeout=` (a Go duration, clamped to 1–30 s), else the handler's timeoutSeconds. */
function callerTimeoutMs(query: HookQuery, handler: HandlerConfig): number {
  const timeoutParam = query.timeout;
  if (typeof timeoutParam !== 'string') return (handler.timeoutSeconds || 10) * 1000;
  const parsed = parseGoDuration(timeoutParam);
  if (parsed === undefined)
    throw new HttpError(400, `query parameter timeout=${JSON.stringify(timeoutParam)} is not a Go duration`, 'timeout');
  // CAPI's timeoutSeconds is 1–30 s; anything else (and timers past 2^31 ms) is clamped into it.
  return Math.min(MAX_TIMEOUT_MS, Math.max(MIN_TIMEOUT_MS, parsed));
}

type Envelope<H extends HookName> = (result: {
  status: 'Success' | 'Failure';
  message?: string;
  retryAfterSeconds?: number;
}) => HookResponse<H>;

/** Wraps a hook's result in the response envelope: apiVersion, kind, a capped message, retryAfterSeconds on retry hooks. */
function envelopeOf<H extends HookName>(hook: H): Envelope<H> {
  const retry = hookCatalog[hook].shape === 'retry';
  return (result) =>
    ({
      apiVersion: HOOKS_API_VERSION,
      kind: `${hook}Response`,
      ...result,
      ...(result.message !== undefined ? { message: capiMessage(result.message) } : {}),
      ...(retry ? { retryAfterSeconds: Math.max(0, Math.trunc(result.retryAfterSeconds ?? 0)) } : {}),
    }) as HookResponse<H>;
}

/** The implementation's result, or BackendUnavailable once the budget runs out (the signal aborted with it). */
async function withinBudget<T>(run: () => Promise<T>, budgetMs: number, controller: AbortController): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadlineReached = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      controller.abort();
      reject(new BackendUnavailable());
    }, budgetMs);
  });
  try {
    return await Promise.race([run(), deadlineReached]);
  } finally {
    clearTimeout(timer);
  }
}

interface Answered<H extends HookName> {
  response: HookResponse<H>;
  outcome: string;
}

/** What CAPI is answered when the implementation throws; an HttpError is rethrown for the error handler. */
function answerToError<H extends HookName>(
  err: unknown,
  hook: H,
  options: HookRouteOptions,
  log: FastifyRequest['log'],
): Answered<H> {
  const envelope = envelopeOf(hook);
  if (err instanceof HttpError) throw err;
  if (err instanceof HookFailure)
    return { response: envelope({ status: 'Failure', message: err.message }), outcome: 'Failure' };
  if (err instanceof BackendUnavailable) {
    log.warn({ hook, reason: err.message }, 'backend unavailable');
    const message = err.capiMessage ?? UNAVAILABLE_MESSAGE;
    // Never let CAPI proceed on unknown state: blocking hooks hold it back.
    const response = hookCatalog[hook].blocking
      ? envelope({ status: 'Success', message, retryAfterSeconds: options.unavailableRetryAfterSeconds })
      : envelope({ status: 'Failure', message });
    return { response, outcome: 'BackendUnavailable' };
  }
  log.error({ hook, err }, 'hook implementation failed');
  const message = `internal error in the ${hook} handler; see the extension logs`;
  return { response: envelope({ status: 'Failure', message }), outcome: 'InternalError' };
}

/** Records the call's metric and its one "hook answered" log line. */
function recordAnswer(
  request: FastifyRequest,
  call: { hook: HookName; handler: HandlerConfig; body: SubjectCarrier; started: number },
  { response, outcome }: Answered<HookName>,
): void {
  const retryAfterSeconds = (response as { retryAfterSeconds?: number }).retryAfterSeconds;
  const answer: HookAnswer =
    response.status === 'Failure' ? 'failure' : (retryAfterSeconds ?? 0) > 0 ? 'retry' : 'success';
  hookRequestDuration.observe({ hook: call.hook, answer }, (performance.now() - call.started) / 1000);
  request.log.info(
    {
      hook: call.hook,
      handler: call.handler.name,
      subject: subjectOf(call.body),
      version: versionOf(call.body),
      outcome,
      status: response.status,
      // Messages are deterministic and carry no secrets (CAPI copies them into conditions).
      message: response.message,
      retryAfterSeconds,
      durationMs: Math.round(performance.now() - call.started),
      bodyBytes: bodyBytesOf(request),
    },
    'hook answered',
  );
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
  const envelope = envelopeOf(hook);
  app.withTypeProvider<TypeBoxTypeProvider>().route({
    method: 'POST',
    url,
    schema: { body: requestSchema(hook), querystring: HookQuerySchema },
    handler: async (request, reply) => {
      const started = performance.now();
      // The provider types the body from requestSchema(hook), and fastify has validated it against
      // that schema; for a generic H TypeScript leaves the provider's conditional type unresolved,
      // so this one assertion names the type it resolves to for every concrete hook.
      const body = request.body as HookRequest<H>;
      const budget = hookBudgetMs(callerTimeoutMs(request.query, handler));
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
      let answered: Answered<H>;
      try {
        const response = envelope(await withinBudget(() => impl(body, ctx), budget, controller));
        answered = { response, outcome: response.status };
      } catch (err) {
        answered = answerToError(err, hook, options, request.log);
      }
      recordAnswer(request, { hook, handler, body: body as SubjectCarrier, started }, answered);
      return reply.code(200).send(answered.response);
    },
  });
  registerMethodNotAllowed(app, url);
}

/** Each connection's caller, read once (CAPI keeps its connections alive). */
const callers = new WeakMap<object, string | undefined>();

/**
 * `{caller}`: the verified client certificate's subject as caller.ts names it (peerIdentity: its CN,
 * else its first DNS name); nothing on plain HTTP or without a certificate.
 */
function callerOf(request: FastifyRequest): { caller?: string } {
  const socket = request.raw.socket;
  let name: string | undefined;
  if (callers.has(socket)) name = callers.get(socket);
  else {
    const identity = peerIdentity(socket);
    name = identity ? subjectName(identity) : undefined;
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

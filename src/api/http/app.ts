// The hook server as a fastify plugin: content parsing (CAPI sends JSON with
// no Content-Type header), one error handler that names the bad field and
// hides 5xx details, 404/405, discovery and the three hook families.
// server.ts owns TLS and listen.
import type { FastifyError, FastifyInstance, FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import {
  DISCOVERY_BODY_LIMIT_BYTES,
  MAX_JSON_DEPTH,
  SMALL_BODY_BYTES,
  SMALL_BODY_RESERVE_BYTES,
  type ServerConfig,
} from '../../config/server.ts';
import { DNS1123_LABEL, DNS1123_SUBDOMAIN } from '../../model/cluster-upgrade.ts';
import { hookBodiesRefused, hookRequestBodyBytes } from '../../ops/metrics.ts';
import { BodyBudget, recordBodyBytes } from './body-budget.ts';
import { HOOKS_PATH_PREFIX, hookCatalog, hookNames, type HookName } from '../hooks/contract.ts';
import { HttpError } from '../hooks/errors.ts';
import { measureJson, type JsonBounds } from '../../domain/json-bounds.ts';
import type { HookRouteOptions } from '../hooks/hook-route.ts';
import type { HookRegistry } from '../hooks/registry.ts';
import { discoveryRoutes } from '../hooks/discovery.ts';
import { inPlaceRoutes, type InPlaceHandlers } from '../handlers/in-place/routes.ts';
import { lifecycleRoutes, type LifecycleHandlers } from '../handlers/lifecycle/routes.ts';
import { upgradePlanRoutes, type UpgradePlanHandlers } from '../handlers/upgrade-plan/routes.ts';

export interface HookAppOptions {
  registry: HookRegistry;
  server: Pick<ServerConfig, 'bodyLimits' | 'bodyBytesInFlight' | 'bodyMaxJsonItems' | 'unavailableRetryAfterSeconds'>;
  lifecycle: LifecycleHandlers;
  upgradePlan: UpgradePlanHandlers;
  inPlace: InPlaceHandlers;
}

interface ErrorBody {
  error: string;
  message: string;
  field?: string;
}

const reasons: Record<number, string> = {
  400: 'BadRequest',
  404: 'NotFound',
  405: 'MethodNotAllowed',
  413: 'PayloadTooLarge',
  415: 'UnsupportedMediaType',
  503: 'ServiceUnavailable',
};

/** How long a body waits for room in the budget before it is refused with 503. */
const BODY_WAIT_MS = 2_000;
/** What a refused-for-now caller is told (CAPI's client ignores it; its controller requeues with backoff). */
const BUSY_RETRY_AFTER_SECONDS = 1;

/**
 * A body declared larger than its limit is still read (and dropped) up to this size before the 413,
 * as Go's server does: closing with unread input resets the connection, and the client may lose
 * the answer. The request timeout bounds how long that takes.
 */
const LINGER_MAX_BYTES = 32 * 1024 * 1024;

async function discard(payload: NodeJS.ReadableStream): Promise<void> {
  try {
    for await (const _chunk of payload) {
      // dropped
    }
  } catch {
    // The client went away or timed out: the 413 goes nowhere either way.
  }
}

/** The hook a route serves (`Discovery` for discovery), from its URL; undefined for other routes. */
function hookOfUrl(url: string): HookName | 'Discovery' | undefined {
  if (url === `${HOOKS_PATH_PREFIX}/discovery`) return 'Discovery';
  return hookNames.find((h) => url.startsWith(`${HOOKS_PATH_PREFIX}/${h.toLowerCase()}/`));
}

function declaredLength(request: FastifyRequest): number | undefined {
  const header = request.headers['content-length'];
  if (header === undefined) return undefined;
  const n = Number(header);
  return Number.isSafeInteger(n) && n >= 0 ? n : undefined;
}

function errorBody(statusCode: number, message: string, field?: string): ErrorBody {
  return { error: reasons[statusCode] ?? 'InternalServerError', message, ...(field ? { field } : {}) };
}

const namePatterns: Record<string, string> = {
  [DNS1123_LABEL.source]: 'a DNS-1123 label (lowercase letters, digits and "-", at most 63 characters)',
  [DNS1123_SUBDOMAIN.source]: 'a DNS-1123 subdomain (lowercase letters, digits, "-" and ".", at most 253 characters)',
};

/** `/cluster/metadata/name` → `cluster.metadata.name`; ajv's missingProperty is appended. */
function fieldOf(instancePath: string, missing?: unknown): string {
  const parts = instancePath.split('/').filter(Boolean);
  if (typeof missing === 'string') parts.push(missing);
  return parts.join('.') || 'body';
}

function validationMessage(error: FastifyError): { message: string; field: string } {
  const first = error.validation?.[0];
  if (!first) return { message: error.message, field: 'body' };
  const field = fieldOf(first.instancePath, first.params.missingProperty);
  // A map key out of bounds (propertyNames): name the key, cut to a readable length.
  const key = (first as { propertyName?: unknown }).propertyName;
  if (typeof key === 'string')
    return { message: `${field}: key ${JSON.stringify(key.slice(0, 64))}: ${first.message ?? 'is invalid'}`, field };
  if (first.keyword === 'required') return { message: `${field}: required field is missing`, field };
  if (first.keyword === 'pattern') {
    const expected = namePatterns[String(first.params.pattern)];
    if (expected) return { message: `${field}: must be ${expected}`, field };
  }
  if (first.keyword === 'const')
    return { message: `${field}: must be ${JSON.stringify(first.params.allowedValue)}`, field };
  return { message: `${field}: ${first.message ?? 'is invalid'}`, field };
}

function tooLarge(limit: number): HttpError {
  return new HttpError(413, `request body is larger than the limit of ${limit} bytes (HOOK_SERVER_BODY_LIMIT_BYTES)`);
}

/** A body that would cost too much to parse or walk: refused before JSON.parse builds it. */
function tooComplex(bound: keyof JsonBounds, bounds: JsonBounds): HttpError {
  return new HttpError(
    413,
    bound === 'maxItems'
      ? `request body holds more than ${bounds.maxItems} JSON items (objects, arrays, members, elements) (HOOK_SERVER_BODY_MAX_JSON_ITEMS)`
      : `request body nests objects and arrays more than ${bounds.maxDepth} deep`,
  );
}

const routeLimit = (request: FastifyRequest) => request.routeOptions.bodyLimit ?? DISCOVERY_BODY_LIMIT_BYTES;
const hookLabel = (request: FastifyRequest) =>
  (request.routeOptions.config as { hook?: string } | undefined)?.hook ?? 'none';

/** Each route's body limit from its hook family: what CAPI can send it (docs/limits.md). */
function limitBodiesByFamily(app: FastifyInstance, limits: ServerConfig['bodyLimits']): void {
  app.addHook('onRoute', (route) => {
    const hook = hookOfUrl(route.url ?? route.path);
    if (!hook) return;
    route.config = { ...route.config, hook };
    route.bodyLimit = hook === 'Discovery' ? DISCOVERY_BODY_LIMIT_BYTES : limits[hookCatalog[hook].family];
  });
}

/**
 * Before a byte of the body is read: too large → 413 at once; no room in the in-flight budget →
 * wait, then 503. The reservation lasts until the response closes (sent, or the connection gone,
 * as after the request timeout), so a slow or idle client holds it no longer than that.
 */
function admitBodies(app: FastifyInstance, bodyBytesInFlight: number): void {
  const budget = new BodyBudget({
    totalBytes: bodyBytesInFlight,
    smallBodyBytes: SMALL_BODY_BYTES,
    smallReserve: SMALL_BODY_RESERVE_BYTES,
    waitMs: BODY_WAIT_MS,
  });
  app.addHook('preParsing', async (request, reply, payload) => {
    const declared = declaredLength(request);
    const chunked = request.headers['transfer-encoding'] !== undefined;
    if (!chunked && !declared) return payload;
    const limit = routeLimit(request);
    if (declared !== undefined && declared > limit) {
      // Read and drop a moderately large body first (nothing is kept: no reservation), so the
      // client reads the 413 instead of a reset; past LINGER_MAX_BYTES the connection just closes.
      if (declared <= LINGER_MAX_BYTES) await discard(payload);
      throw tooLarge(limit);
    }
    const release = await budget.acquire(declared ?? limit);
    if (!release) {
      // As for the 413: drop the body unread (no reservation needed: nothing is kept) so the
      // client reads the 503 instead of a connection reset.
      await discard(payload);
      void reply.header('retry-after', String(BUSY_RETRY_AFTER_SECONDS));
      throw new HttpError(503, 'too many request bodies in flight; retry shortly (HOOK_SERVER_BODY_BYTES_IN_FLIGHT)');
    }
    reply.raw.once('close', release);
    return payload;
  });
}

/**
 * CAPI's client sets no Content-Type: every body is read as JSON, once its shape is known to be
 * cheap to build (json-bounds.ts): no body makes one parse hold the event loop for seconds.
 */
function parseBodiesAsJson(app: FastifyInstance, maxItems: number): void {
  const jsonBounds: JsonBounds = { maxItems, maxDepth: MAX_JSON_DEPTH };
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer' }, (request, body, done) => {
    const bytes = body.length;
    recordBodyBytes(request, bytes);
    hookRequestBodyBytes.observe({ hook: hookLabel(request) }, bytes);
    const { exceeded } = measureJson(body as Buffer, jsonBounds);
    if (exceeded) return done(tooComplex(exceeded, jsonBounds), undefined);
    const text = body.toString('utf8');
    if (text.trim() === '') return done(new HttpError(400, 'request body is empty; expected a JSON object'), undefined);
    try {
      done(null, JSON.parse(text));
    } catch (err) {
      done(new HttpError(400, `request body is not valid JSON: ${(err as Error).message}`), undefined);
    }
  });
}

/** A request we refuse: answered with the reason, and logged so an operator sees why CAPI's call failed. */
function reject(request: FastifyRequest, reply: FastifyReply, status: number, message: string, field?: string) {
  if (status === 413 || status === 503)
    hookBodiesRefused.inc({ hook: hookLabel(request), reason: status === 413 ? 'too_large' : 'busy' });
  request.log.warn({ statusCode: status, url: request.url.split('?')[0], reason: message, field }, 'request rejected');
  return reply.code(status).send(errorBody(status, message, field));
}

/** One error handler that names the bad field and hides 5xx details, and the 404 for every other URL. */
function answerErrors(app: FastifyInstance): void {
  app.setErrorHandler((error: FastifyError, request, reply) => {
    if (error.validation) {
      // fastify skips body parsing when Content-Length is 0.
      if (request.body === undefined || request.body === null) {
        return reject(request, reply, 400, 'request body is empty; expected a JSON object');
      }
      const { message, field } = validationMessage(error);
      return reject(request, reply, 400, message, field);
    }
    if (error instanceof HttpError) return reject(request, reply, error.statusCode, error.message, error.field);
    if (error.code === 'FST_ERR_CTP_BODY_TOO_LARGE') {
      const { statusCode, message } = tooLarge(routeLimit(request));
      return reject(request, reply, statusCode, message);
    }
    const status = error.statusCode ?? 500;
    if (status >= 400 && status < 500) return reject(request, reply, status, error.message);
    request.log.error({ err: error }, 'unhandled error');
    return reply.code(500).send(errorBody(500, 'internal server error'));
  });

  app.setNotFoundHandler((request, reply) =>
    reject(request, reply, 404, `no handler at ${request.method} ${request.url.split('?')[0]}`),
  );
}

const hookApp: FastifyPluginAsync<HookAppOptions> = async (app: FastifyInstance, opts) => {
  limitBodiesByFamily(app, opts.server.bodyLimits);
  admitBodies(app, opts.server.bodyBytesInFlight);
  parseBodiesAsJson(app, opts.server.bodyMaxJsonItems);
  answerErrors(app);
  const routeOptions: HookRouteOptions = {
    registry: opts.registry,
    unavailableRetryAfterSeconds: opts.server.unavailableRetryAfterSeconds,
  };
  await app.register(discoveryRoutes, { registry: opts.registry });
  await app.register(lifecycleRoutes, { ...routeOptions, handlers: opts.lifecycle });
  await app.register(upgradePlanRoutes, { ...routeOptions, handlers: opts.upgradePlan });
  await app.register(inPlaceRoutes, { ...routeOptions, handlers: opts.inPlace });
  app.get('/healthz', async () => ({ status: 'ok' }));
};

export default fp(hookApp, { name: 'capi-hook-app', fastify: '5.x' });

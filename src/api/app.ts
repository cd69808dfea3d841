// The hook server as a fastify plugin: content parsing (CAPI sends JSON with
// no Content-Type header), one error handler that names the bad field and
// hides 5xx details, 404/405, discovery and the three hook families.
// server.ts owns TLS and listen.
import type { FastifyError, FastifyInstance, FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import type { ServerConfig } from '../config.ts';
import { DNS1123_LABEL, DNS1123_SUBDOMAIN } from '../model/cluster-upgrade.ts';
import { HttpError } from './errors.ts';
import type { HookRouteOptions } from './hook-route.ts';
import type { HookRegistry } from './registry.ts';
import { discoveryRoutes } from './routes/discovery.ts';
import { inPlaceRoutes, type InPlaceHandlers } from './routes/in-place.ts';
import { lifecycleRoutes, type LifecycleHandlers } from './routes/lifecycle.ts';
import { upgradePlanRoutes, type UpgradePlanHandlers } from './routes/upgrade-plan.ts';

export interface HookAppOptions {
  registry: HookRegistry;
  server: Pick<ServerConfig, 'bodyLimitBytes' | 'unavailableRetryAfterSeconds'>;
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
};

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
  if (first.keyword === 'required') return { message: `${field}: required field is missing`, field };
  if (first.keyword === 'pattern') {
    const expected = namePatterns[String(first.params.pattern)];
    if (expected) return { message: `${field}: must be ${expected}`, field };
  }
  if (first.keyword === 'const')
    return { message: `${field}: must be ${JSON.stringify(first.params.allowedValue)}`, field };
  return { message: `${field}: ${first.message ?? 'is invalid'}`, field };
}

const hookApp: FastifyPluginAsync<HookAppOptions> = async (app: FastifyInstance, opts) => {
  // CAPI's client sets no Content-Type: every body is read as JSON.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'string', bodyLimit: opts.server.bodyLimitBytes }, (_req, body, done) => {
    const text = typeof body === 'string' ? body : body.toString('utf8');
    if (text.trim() === '') return done(new HttpError(400, 'request body is empty; expected a JSON object'), undefined);
    try {
      done(null, JSON.parse(text));
    } catch (err) {
      done(new HttpError(400, `request body is not valid JSON: ${(err as Error).message}`), undefined);
    }
  });

  /** A request we refuse: answered with the reason, and logged so an operator sees why CAPI's call failed. */
  const reject = (request: FastifyRequest, reply: FastifyReply, status: number, message: string, field?: string) => {
    request.log.warn(
      { statusCode: status, url: request.url.split('?')[0], reason: message, field },
      'request rejected',
    );
    return reply.code(status).send(errorBody(status, message, field));
  };

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
      return reject(
        request,
        reply,
        413,
        `request body is larger than the limit of ${opts.server.bodyLimitBytes} bytes`,
      );
    }
    const status = error.statusCode ?? 500;
    if (status >= 400 && status < 500) return reject(request, reply, status, error.message);
    request.log.error({ err: error }, 'unhandled error');
    return reply.code(500).send(errorBody(500, 'internal server error'));
  });

  app.setNotFoundHandler((request, reply) =>
    reject(request, reply, 404, `no handler at ${request.method} ${request.url.split('?')[0]}`),
  );

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

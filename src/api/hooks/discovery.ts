import type { FastifyPluginAsync } from 'fastify';
import { DiscoveryRequestSchema, HOOKS_PATH_PREFIX } from './contract.ts';
import { registerMethodNotAllowed } from './hook-route.ts';
import type { HookRegistry } from './registry.ts';

export const DISCOVERY_PATH = `${HOOKS_PATH_PREFIX}/discovery`;

export const discoveryRoutes: FastifyPluginAsync<{ registry: HookRegistry }> = async (app, { registry }) => {
  const response = registry.discovery();
  app.post(DISCOVERY_PATH, { schema: { body: DiscoveryRequestSchema } }, async () => response);
  registerMethodNotAllowed(app, DISCOVERY_PATH);
};

import type { FastifyPluginAsync } from 'fastify';
import { registerHook, type HookImplementation, type HookRouteOptions } from '../hook-route.ts';

export interface UpgradePlanHandlers {
  GenerateUpgradePlan: HookImplementation<'GenerateUpgradePlan'>;
}

export const upgradePlanRoutes: FastifyPluginAsync<HookRouteOptions & { handlers: UpgradePlanHandlers }> = async (
  app,
  opts,
) => {
  registerHook(app, opts, 'GenerateUpgradePlan', opts.handlers.GenerateUpgradePlan);
};

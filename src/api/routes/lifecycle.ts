// Lifecycle hooks: BeforeClusterCreate … BeforeClusterDelete. What each one
// does is decided by the handlers passed in (the cluster upgrade workflow
// client); this file only binds them to their routes.
import type { FastifyPluginAsync } from 'fastify';
import { lifecycleHooks, type LifecycleHook } from '../../model/hooks.ts';
import { registerHook, type HookImplementation, type HookRouteOptions } from '../hook-route.ts';

export { lifecycleHooks, type LifecycleHook };

export type LifecycleHandlers = { [H in LifecycleHook]: HookImplementation<H> };

export const lifecycleRoutes: FastifyPluginAsync<HookRouteOptions & { handlers: LifecycleHandlers }> = async (
  app,
  opts,
) => {
  for (const hook of lifecycleHooks)
    registerHook(app, opts, hook, opts.handlers[hook] as HookImplementation<typeof hook>);
};

/** Until a workflow backs them: record nothing, hold nothing back. */
export const nonBlockingLifecycleHandlers: LifecycleHandlers = {
  BeforeClusterCreate: async () => ({ status: 'Success', retryAfterSeconds: 0 }),
  AfterControlPlaneInitialized: async () => ({ status: 'Success' }),
  BeforeClusterUpgrade: async () => ({ status: 'Success', retryAfterSeconds: 0 }),
  BeforeControlPlaneUpgrade: async () => ({ status: 'Success', retryAfterSeconds: 0 }),
  AfterControlPlaneUpgrade: async () => ({ status: 'Success', retryAfterSeconds: 0 }),
  BeforeWorkersUpgrade: async () => ({ status: 'Success', retryAfterSeconds: 0 }),
  AfterWorkersUpgrade: async () => ({ status: 'Success', retryAfterSeconds: 0 }),
  AfterClusterUpgrade: async () => ({ status: 'Success', retryAfterSeconds: 0 }),
  BeforeClusterDelete: async () => ({ status: 'Success', retryAfterSeconds: 0 }),
};

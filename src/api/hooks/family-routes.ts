// One hook family's routes: every hook of the family registered through the generic hook route with
// the implementation passed in. The families (lifecycle, in-place, upgrade-plan) list their hooks
// in model/hooks.ts; their handlers/ folders bind their implementations here.
import type { FastifyPluginAsync } from 'fastify';
import type { HookName } from './contract.ts';
import { registerHook, type HookImplementation, type HookRouteOptions } from './hook-route.ts';

/** An implementation for every hook of a family. */
export type FamilyHandlers<H extends HookName> = { [K in H]: HookImplementation<K> };

export function familyRoutes<H extends HookName>(
  hooks: readonly H[],
): FastifyPluginAsync<HookRouteOptions & { handlers: FamilyHandlers<H> }> {
  return async (app, opts) => {
    for (const hook of hooks) registerHook(app, opts, hook, opts.handlers[hook] as HookImplementation<typeof hook>);
  };
}

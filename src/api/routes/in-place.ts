import type { FastifyPluginAsync } from 'fastify';
import { HookFailure } from '../errors.ts';
import { registerHook, type HookImplementation, type HookRouteOptions } from '../hook-route.ts';

export interface InPlaceHandlers {
  CanUpdateMachine: HookImplementation<'CanUpdateMachine'>;
  CanUpdateMachineSet: HookImplementation<'CanUpdateMachineSet'>;
  UpdateMachine: HookImplementation<'UpdateMachine'>;
}

export const inPlaceRoutes: FastifyPluginAsync<HookRouteOptions & { handlers: InPlaceHandlers }> = async (
  app,
  opts,
) => {
  registerHook(app, opts, 'CanUpdateMachine', opts.handlers.CanUpdateMachine);
  registerHook(app, opts, 'CanUpdateMachineSet', opts.handlers.CanUpdateMachineSet);
  registerHook(app, opts, 'UpdateMachine', opts.handlers.UpdateMachine);
};

/**
 * In-place updates switched off: declare no change in-place (CAPI then rolls
 * machines out), and refuse UpdateMachine, which CAPI only sends after a
 * CanUpdate* answer carried patches.
 */
export const noInPlaceHandlers: InPlaceHandlers = {
  CanUpdateMachine: async () => ({ status: 'Success' }),
  CanUpdateMachineSet: async () => ({ status: 'Success' }),
  UpdateMachine: async () => {
    throw new HookFailure('in-place updates are not enabled in this extension; no machine update was started');
  },
};

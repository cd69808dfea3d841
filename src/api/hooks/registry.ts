// Which handlers this extension serves, under which names, timeouts and
// failure policies. Discovery lists it; the routes are registered from it.
import type { HandlerConfig } from '../../config/server.ts';
import { HOOKS_API_VERSION, type DiscoveryResponse, type HookName } from './contract.ts';

export class HookRegistry {
  readonly #byHook: Map<HookName, HandlerConfig>;

  constructor(handlers: readonly HandlerConfig[]) {
    this.#byHook = new Map(handlers.filter((h) => h.enabled).map((h) => [h.hook, h]));
  }

  /** The enabled handler for a hook, or undefined when it is switched off. */
  handler(hook: HookName): HandlerConfig | undefined {
    return this.#byHook.get(hook);
  }

  discovery(): DiscoveryResponse {
    return {
      apiVersion: HOOKS_API_VERSION,
      kind: 'DiscoveryResponse',
      status: 'Success',
      handlers: [...this.#byHook.values()].map((h) => ({
        name: h.name,
        requestHook: { apiVersion: HOOKS_API_VERSION, hook: h.hook },
        timeoutSeconds: h.timeoutSeconds,
        failurePolicy: h.failurePolicy,
      })),
    };
  }
}

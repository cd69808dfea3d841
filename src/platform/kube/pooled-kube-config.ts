// A KubeConfig whose API calls share one connection pool (see below).
import { KubeConfig } from '@kubernetes/client-node';

type RequestContext = Parameters<KubeConfig['applySecurityAuthentication']>[0];
type Dispatcher = NonNullable<ReturnType<RequestContext['getDispatcher']>>;

/**
 * A KubeConfig whose API calls share one connection pool. client-node 2.0 builds a new undici
 * Agent for every request, so every call paid a fresh TLS handshake (on both ends) and left an
 * agent for the GC: measured in bench/machine-updates.ts as most of the worker's CPU and memory.
 * The first request's dispatcher is kept (its TLS options are this KubeConfig's; a rotated
 * kubeconfig is a new KubeConfig) and later fresh ones are closed unused.
 */
export class PooledKubeConfig extends KubeConfig {
  private dispatcher: Dispatcher | undefined;

  override async applySecurityAuthentication(context: RequestContext): Promise<void> {
    await super.applySecurityAuthentication(context);
    const fresh = context.getDispatcher();
    if (!fresh) return;
    this.dispatcher ??= fresh;
    if (fresh !== this.dispatcher) {
      context.setDispatcher(this.dispatcher);
      void fresh.close().catch(() => undefined);
    }
  }
}

// A watch of a workload cluster's collection, read as bounded as its lists: no
// encoding it did not ask for, no redirect, JSON only, each event at most the
// largest object etcd stores (with room), and closed when no byte came for a
// while. client-node's Watch reads lines of any length and inflates gzip.
import { HttpMethod, RequestContext, type KubeConfig } from '@kubernetes/client-node';
import { request, type Dispatcher } from 'undici';
import { measureJson } from '../../domain/json-bounds.ts';
import { readLimitsOf } from './workload-kube-config.ts';
import { WorkloadReadError } from './workload-limits.ts';

/** etcd stores objects up to 1.5 MiB; an event line holds one and its envelope. */
export const MAX_WATCH_EVENT_BYTES = 2 * 1024 * 1024;
/** No byte for this long (the server's own timeout is shorter): the watch has stalled. */
const IDLE_MS = 30_000;

export interface WatchEvent {
  type: string;
  object: { metadata?: { name?: string } };
}

/**
 * Opens a watch of `path` and calls `onEvent` per event; `done` once when it ends (undefined:
 * ended by the server). Returns the controller that stops it.
 */
export async function watchBounded(
  kc: KubeConfig,
  path: string,
  query: Record<string, string | number>,
  onEvent: (event: WatchEvent) => void,
  done: (err?: Error) => void,
): Promise<AbortController> {
  const server = kc.getCurrentCluster()?.server;
  if (!server) throw new Error('the kubeconfig names no server');
  const url = new URL(server + path);
  url.searchParams.set('watch', 'true');
  for (const [k, v] of Object.entries(query)) url.searchParams.set(k, String(v));
  const { cluster, limits } = readLimitsOf(kc);
  const where = `${cluster ? `workload cluster ${cluster}: ` : ''}watch ${path}`;
  const ctx = new RequestContext(url.toString(), HttpMethod.GET);
  await kc.applySecurityAuthentication(ctx);

  const controller = new AbortController();
  let ended = false;
  let idle: NodeJS.Timeout | undefined;
  const end = (err?: Error) => {
    if (ended) return;
    ended = true;
    clearTimeout(idle);
    controller.abort(err);
    done(err);
  };
  const touch = () => {
    clearTimeout(idle);
    idle = setTimeout(() => end(new WorkloadReadError('timeout', `${where}: no data for ${IDLE_MS / 1000}s`)), IDLE_MS);
    idle.unref();
  };
  const refuse = (detail: string) => end(new WorkloadReadError('malformed', `${where}: ${detail}`));

  void (async () => {
    touch();
    const res = await request(url, {
      method: 'GET',
      headers: { ...ctx.getHeaders(), 'accept-encoding': 'identity' },
      ...(ctx.getDispatcher() ? { dispatcher: ctx.getDispatcher() as Dispatcher } : {}),
      signal: controller.signal,
    });
    const encoding = res.headers['content-encoding'];
    const type = String(res.headers['content-type'] ?? '');
    if (res.statusCode !== 200) return refuse(`answered HTTP ${res.statusCode}`);
    if (encoding && encoding !== 'identity') return refuse('answered with a Content-Encoding it was not asked for');
    if (!type.startsWith('application/json')) return refuse('answered something other than JSON');
    let pending: Buffer = Buffer.alloc(0);
    for await (const chunk of res.body as AsyncIterable<Buffer>) {
      touch();
      pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
      let nl: number;
      while ((nl = pending.indexOf(0x0a)) >= 0) {
        const line = pending.subarray(0, nl);
        pending = pending.subarray(nl + 1);
        const measured = measureJson(line, { maxItems: limits.maxJsonItems, maxDepth: limits.maxJsonDepth });
        if (measured.exceeded) return refuse('sent an event over the JSON limits');
        try {
          const event = JSON.parse(line.toString('utf8')) as WatchEvent;
          if (typeof event?.type === 'string' && typeof event.object === 'object' && event.object !== null)
            onEvent(event);
        } catch {
          // A line that is not an event: the waiters read the object on their own schedule anyway.
        }
      }
      if (pending.length > MAX_WATCH_EVENT_BYTES) return refuse(`sent an event over ${MAX_WATCH_EVENT_BYTES} bytes`);
    }
    end();
  })().catch((err: unknown) => end(err instanceof Error ? err : new Error(String(err))));
  return controller;
}

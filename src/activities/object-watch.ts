// Wakes whoever waits on a Kubernetes object the moment it changes, instead of at
// their next poll. One watch per workload cluster and collection (the Jobs or
// NodeUpgradeRequests this process manages there, by label) serves every object
// waited on in it, and closes when the last waiter leaves.
//
// It only shortens waits: the waiters still read the object on their own
// schedule, so a watch that cannot be opened (no `watch` permission, a proxy
// that buffers streams, an API server restarting) costs latency, never
// correctness. The API server ends a watch after `timeoutSeconds`; it is
// reopened at once, and after an error after a pause.
import type { KubeConfig } from '@kubernetes/client-node';
import { watchBounded } from '../platform/kube/bounded-watch.ts';

/** A collection to watch: its API path (`/apis/batch/v1/namespaces/kube-system/jobs`) and label selector. */
export interface WatchedCollection {
  path: string;
  labelSelector: string;
}

// Under the watch's 30 s without data, after which it ends the watch as an error (and the
// reopen would wait REOPEN_AFTER_ERROR_MS): the server ends a quiet watch cleanly first.
const SERVER_TIMEOUT_SECONDS = 25;
const REOPEN_AFTER_ERROR_MS = 5_000;

interface SharedWatch {
  /** Callbacks by object name. */
  waiters: Map<string, Set<() => void>>;
  stop(): void;
}

// Keyed by the KubeConfig object: workload clients are cached per cluster, so one per cluster.
const watches = new WeakMap<KubeConfig, Map<string, SharedWatch>>();

function openShared(kc: KubeConfig, collection: WatchedCollection, onEmpty: () => void): SharedWatch {
  let stopped = false;
  let controller: AbortController | undefined;
  let timer: NodeJS.Timeout | undefined;
  const shared: SharedWatch = {
    waiters: new Map(),
    stop: () => {
      stopped = true;
      if (timer) clearTimeout(timer);
      controller?.abort();
      onEmpty();
    },
  };
  const reopen = (afterMs: number) => {
    if (stopped) return;
    timer = setTimeout(() => void open(), afterMs);
    // Never what keeps a process alive.
    timer.unref();
  };
  const open = async () => {
    if (stopped) return;
    const openedAt = Date.now();
    try {
      controller = await watchBounded(
        kc,
        collection.path,
        { labelSelector: collection.labelSelector, timeoutSeconds: SERVER_TIMEOUT_SECONDS },
        ({ type, object }) => {
          if (type === 'BOOKMARK') return;
          const name = object.metadata?.name;
          for (const wake of (name && shared.waiters.get(name)) || []) wake();
        },
        // Ended by the server's timeout: reopen at once; by an error, or at once after opening
        // (a proxy that cuts streams), after a pause, so a broken watch never spins.
        (err) => reopen(err || Date.now() - openedAt < REOPEN_AFTER_ERROR_MS ? REOPEN_AFTER_ERROR_MS : 0),
      );
      if (stopped) controller.abort();
    } catch {
      // No credentials for the cluster (authentication failed before any request): try later.
      reopen(REOPEN_AFTER_ERROR_MS);
    }
  };
  void open();
  return shared;
}

/**
 * Calls `onChange` whenever the object `name` of `collection` in the cluster of `kc` is added,
 * modified or deleted (and once each time the watch is reopened, when it is there). Returns the
 * function that stops it.
 */
export function watchObject(
  kc: KubeConfig,
  collection: WatchedCollection,
  name: string,
  onChange: () => void,
): () => void {
  let byCollection = watches.get(kc);
  if (!byCollection) watches.set(kc, (byCollection = new Map()));
  const key = `${collection.path}?${collection.labelSelector}`;
  let shared = byCollection.get(key);
  if (!shared) {
    const map = byCollection;
    const opened = openShared(kc, collection, () => {
      if (map.get(key) === opened) map.delete(key);
    });
    byCollection.set(key, (shared = opened));
  }
  const { waiters } = shared;
  const own = waiters.get(name) ?? new Set();
  waiters.set(name, own);
  // A function of its own, so the same callback subscribed twice is two waiters.
  const wake = () => onChange();
  own.add(wake);
  const watch = shared;
  let stopped = false;
  return () => {
    if (stopped) return;
    stopped = true;
    own.delete(wake);
    if (own.size === 0 && waiters.get(name) === own) waiters.delete(name);
    if (waiters.size === 0) watch.stop();
  };
}

/** How many shared watches are open (for tests). */
export function openWatchCount(kc: KubeConfig): number {
  return watches.get(kc)?.size ?? 0;
}

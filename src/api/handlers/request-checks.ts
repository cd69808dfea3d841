// Every hook call that would start or signal a workflow is first checked
// against the management cluster's own objects (docs/security.md, "Boundaries"):
// whatever the transport, a request that does not describe what CAPI is doing
// right now changes nothing. One mechanism, one small rule per hook:
//   - UpdateMachine: the Machine exists, belongs to the named Cluster, its spec
//     (version, bootstrap config reference) is the desired one, and CAPI is
//     updating it in place (the markers CAPI v1.14 sets before it calls us);
//   - BeforeClusterDelete: the Cluster is being deleted, or gone;
//   - BeforeClusterUpgrade and the upgrade gates: the Cluster exists with the
//     request's uid and its spec.topology.version is the upgrade's target.
// A check runs once per call, lazily, right before the call's first write:
// repeat polls of known work answer from what Temporal has and never read
// Kubernetes. docs/request-checks.md says what CAPI sees in each case.
import { CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import { stableError } from '../../platform/kube/stable-error.ts';
import { apiClient } from '../../platform/kube/clients.ts';
import { isObjectNotFound } from '../../platform/kube/errors.ts';
import { hookRequestChecks } from '../../ops/metrics.ts';
import { BackendUnavailable, HookFailure } from '../hooks/errors.ts';
import type { HookContext } from '../hooks/hook-route.ts';
import { CAPI_GROUP, CAPI_VERSION, type ClusterObject, type MachineObject } from '../../platform/kube/capi-api.ts';

/** Set by KCP / the MachineSet controller on a Machine it updates in place (clusterv1.UpdateInProgressAnnotation). */
export const UPDATE_IN_PROGRESS_ANNOTATION = 'in-place-updates.internal.cluster.x-k8s.io/update-in-progress';
/** The hooks CAPI intends to call for an object (runtimev1.PendingHooksAnnotation, a comma-separated list). */
export const PENDING_HOOKS_ANNOTATION = 'runtime.cluster.x-k8s.io/pending-hooks';

/** Logged at start when the checks are on. */
export const REQUEST_CHECKS_ON_MESSAGE =
  'hook requests are checked against the management cluster before anything starts';

/** What the answer to CAPI says when the management cluster cannot be read: hold, never proceed. */
export const CHECK_UNAVAILABLE_MESSAGE =
  'orchestrator unavailable: the management cluster could not be read to check this request; will retry';

/** Reads of the management cluster; undefined = not found. Any other error means "cannot tell". */
export interface ManagementObjects {
  cluster(namespace: string, name: string): Promise<ClusterObject | undefined>;
  machine(namespace: string, name: string): Promise<MachineObject | undefined>;
}

/** What a rule found: undefined when the request matches, else what did not match (CAPI reads it). */
export type Verdict = string | undefined;
export type Rule = (objects: ManagementObjects) => Promise<Verdict>;

/** The management cluster could not be read: hold (retry), as when Temporal does not answer. */
export class CheckUnavailable extends BackendUnavailable {}

/** Refused by its check: a Failure whose message says what did not match. */
export class RequestRefused extends HookFailure {
  constructor(mismatch: string) {
    super(`refused: ${mismatch}`);
    this.name = 'RequestRefused';
  }
}

// ---- the rules -----------------------------------------------------------------------

const ref = (namespace: string, name: string) => `${namespace}/${name}`;
const shown = (value: string | undefined) => (value === undefined || value === '' ? '(unset)' : value);

/** The desired Machine of an UpdateMachine request, as the handler read it. */
export interface DesiredMachine {
  namespace: string;
  name: string;
  clusterName: string;
  version: string;
  bootstrapConfigRef?: { apiGroup?: string; kind?: string; name?: string };
}

function configRefText(r: { kind?: string; name?: string } | undefined): string {
  return r?.name ? `${r.kind ?? '?'}/${r.name}` : '(unset)';
}

/** UpdateMachine: the Machine CAPI hands to UpdateMachine, as CAPI v1.14 marks it (see docs/request-checks.md). */
export function updateMachineRule(desired: DesiredMachine): Rule {
  return async (objects) => {
    const what = `Machine ${ref(desired.namespace, desired.name)}`;
    const machine = await objects.machine(desired.namespace, desired.name);
    if (!machine) return `${what} does not exist`;
    const cluster = machine.spec?.clusterName;
    if (cluster !== desired.clusterName)
      return `${what} belongs to Cluster ${ref(desired.namespace, shown(cluster))}, not ${ref(desired.namespace, desired.clusterName)}`;
    const version = machine.spec?.version;
    if (version !== desired.version)
      return `${what} spec.version is ${shown(version)}, not the desired ${desired.version}`;
    const have = machine.spec?.bootstrap?.configRef;
    const want = desired.bootstrapConfigRef;
    const differs =
      have?.name !== want?.name ||
      (want?.kind !== undefined && have?.kind !== want.kind) ||
      (want?.apiGroup !== undefined && have?.apiGroup !== want.apiGroup);
    if (differs)
      return `${what} spec.bootstrap.configRef is ${configRefText(have)}, not the desired ${configRefText(want)}`;
    const annotations = machine.metadata?.annotations ?? {};
    if (!(UPDATE_IN_PROGRESS_ANNOTATION in annotations))
      return `${what} is not being updated in place (no ${UPDATE_IN_PROGRESS_ANNOTATION} annotation)`;
    const pending = (annotations[PENDING_HOOKS_ANNOTATION] ?? '').split(',').map((h) => h.trim());
    if (!pending.includes('UpdateMachine'))
      return `${what} is not being updated in place (UpdateMachine is not in its ${PENDING_HOOKS_ANNOTATION} annotation)`;
    return undefined;
  };
}

/** BeforeClusterDelete: only for a Cluster being deleted (deletionTimestamp set) or already gone. */
export function clusterDeleteRule(cluster: { namespace: string; name: string }): Rule {
  return async (objects) => {
    const stored = await objects.cluster(cluster.namespace, cluster.name);
    if (!stored || stored.metadata?.deletionTimestamp) return undefined;
    return `Cluster ${ref(cluster.namespace, cluster.name)} is not being deleted (no deletionTimestamp)`;
  };
}

/**
 * BeforeClusterUpgrade and the upgrade gates: every one of them carries the Cluster as CAPI's
 * topology controller read it, so the Cluster exists with that uid and its spec.topology.version is
 * the upgrade's target (an intermediate step's toKubernetesVersion is not: only the target is checked).
 */
export function clusterUpgradeRule(cluster: { namespace: string; name: string; uid: string }, target: string): Rule {
  return async (objects) => {
    const what = `Cluster ${ref(cluster.namespace, cluster.name)}`;
    const stored = await objects.cluster(cluster.namespace, cluster.name);
    if (!stored) return `${what} does not exist`;
    const uid = stored.metadata?.uid;
    if (uid !== cluster.uid) return `${what} has uid ${shown(uid)}, not the request's ${cluster.uid}`;
    const version = stored.spec?.topology?.version;
    if (version !== target)
      return `${what} spec.topology.version is ${shown(version)}, not the request's target ${target}`;
    return undefined;
  };
}

// ---- the mechanism -------------------------------------------------------------------

export interface RequestChecks {
  /** False only when switched off (HOOK_REQUEST_CHECKS=off). */
  readonly enabled: boolean;
  /**
   * A function to await before each write of this call: the first await runs `rule` (once),
   * later ones repeat its outcome. Throws {@link RequestRefused} when the request does not match,
   * {@link BackendUnavailable} when the management cluster cannot be read.
   */
  before(ctx: Pick<HookContext, 'hook' | 'deadline' | 'log' | 'caller'>, rule: Rule): () => Promise<void>;
}

/** Checks switched off: every request is taken as it comes (development, tests without a management cluster). */
export const requestChecksOff: RequestChecks = {
  enabled: false,
  before: () => async () => undefined,
};

/** How long a check may wait for the management cluster, at most (less when the hook's budget ends sooner). */
const READ_TIMEOUT_MS = 5_000;

/** Gives up on `p` at `deadline`: the check then holds rather than lets the request through. */
async function until<T>(p: Promise<T>, deadline: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      p,
      new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(new Error('the management cluster did not answer in time')),
          Math.max(0, deadline - Date.now()),
        );
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

export function createRequestChecks(objects: ManagementObjects): RequestChecks {
  return {
    enabled: true,
    before(ctx, rule) {
      let outcome: Promise<void> | undefined;
      const run = async () => {
        let verdict: Verdict;
        try {
          verdict = await until(rule(objects), Math.min(ctx.deadline, Date.now() + READ_TIMEOUT_MS));
        } catch (err) {
          // Stable words only: client-node's messages carry headers and bodies.
          const reason = stableError(err).message;
          ctx.log.warn({ hook: ctx.hook, reason }, 'request check could not read the management cluster');
          hookRequestChecks.inc({ hook: ctx.hook, result: 'unavailable' });
          throw new CheckUnavailable(`request check: ${reason}`, CHECK_UNAVAILABLE_MESSAGE);
        }
        hookRequestChecks.inc({ hook: ctx.hook, result: verdict === undefined ? 'passed' : 'refused' });
        if (verdict === undefined) return;
        ctx.log.warn(
          { hook: ctx.hook, caller: ctx.caller ?? '(no client certificate)', mismatch: verdict },
          'request refused by its check',
        );
        throw new RequestRefused(verdict);
      };
      return () => (outcome ??= run());
    },
  };
}

/**
 * The Cluster API objects as the api reads them, through `management` (get on clusters and
 * machines), at `version` (Cluster API's v1beta2 unless a test names one the server lacks).
 */
export function managementObjects(management: KubeConfig, opts: { version?: string } = {}): ManagementObjects {
  const custom = apiClient(management, CustomObjectsApi);
  const get = async <T>(plural: 'clusters' | 'machines', namespace: string, name: string) => {
    try {
      return (await custom.getNamespacedCustomObject({
        group: CAPI_GROUP,
        version: opts.version ?? CAPI_VERSION,
        namespace,
        plural,
        name,
      })) as T;
    } catch (err) {
      // Only the object's own 404 means gone; an unserved kind means "cannot tell".
      if (isObjectNotFound(err, name)) return undefined;
      throw err;
    }
  };
  return {
    cluster: (namespace, name) => get<ClusterObject>('clusters', namespace, name),
    machine: (namespace, name) => get<MachineObject>('machines', namespace, name),
  };
}

// The Kubernetes side of one drain: list the node's pods and sort them with the
// kubectl-drain rules (src/domain/drain.ts), evict through the Eviction API
// (naming the PodDisruptionBudget that refused), and delete. Each call is one
// round trip; the drain activity (drain.ts) decides when to call what.
import {
  CoreV1Api,
  PolicyV1Api,
  type KubeConfig,
  type V1Pod,
  type V1PodDisruptionBudget,
} from '@kubernetes/client-node';
import { ApplicationFailure } from '@temporalio/common';
import { filterPodsForDrain, parseSkipPodSelector, type DrainFilterResult, type PdbBlock } from '../../domain/drain.ts';
import type { LabelRequirement } from '../../domain/label-selector.ts';
import { listPaged } from '../../platform/kube/paged-list.ts';
import { apiClient } from '../../platform/kube/clients.ts';
import { isConflict, isNotFound, isTooManyRequests } from '../../platform/kube/errors.ts';
import { isRecord, MACHINE_UPDATE_FAILURES } from '../machine-update-common.ts';
import type { DrainOptions } from '../machine-update-types.ts';
import { pdbSelectorMatches } from '../../domain/cluster-health.ts';

export interface DrainRound {
  verdict: DrainFilterResult<V1Pod>;
  /** Pods on their way out that the drain waits for (not DaemonSet, mirror, skip-labelled or skip-selected ones). */
  terminating: V1Pod[];
}

export class NodeDrainer {
  private readonly kc: KubeConfig;
  private readonly core: CoreV1Api;
  private readonly policy: PolicyV1Api;
  private readonly nodeName: string;
  private readonly options: DrainOptions;
  private readonly skipSelector: LabelRequirement[];
  private pdbs = new Map<string, V1PodDisruptionBudget[]>();

  constructor(kc: KubeConfig, nodeName: string, options: DrainOptions) {
    this.kc = kc;
    this.core = apiClient(kc, CoreV1Api);
    this.policy = apiClient(kc, PolicyV1Api);
    this.nodeName = nodeName;
    this.options = options;
    // Checked where it was set (setting: the hook; annotation: preflight); checked again, never trusted.
    const skip = parseSkipPodSelector('drain skipPodSelector', options.skipPodSelector?.trim() ?? '');
    if (!skip.ok) throw ApplicationFailure.nonRetryable(skip.message, MACHINE_UPDATE_FAILURES.invalidInput);
    this.skipSelector = skip.selector;
  }

  /** The node's pods sorted with kubectl-drain rules; pods being deleted are waited for unless drains skip them. */
  async survey(): Promise<DrainRound> {
    this.pdbs.clear();
    const fieldSelector = `spec.nodeName=${this.nodeName}`;
    const pods = await listPaged(this.kc, `pods on node ${this.nodeName}`, (page) =>
      this.core.listPodForAllNamespaces({ fieldSelector, ...page }),
    );
    const skipSelector = this.skipSelector;
    const filterOptions = {
      deleteEmptyDirData: this.options.deleteEmptyDirData,
      force: this.options.force,
      skipSelector,
    };
    const live = pods.filter((p) => !p.metadata?.deletionTimestamp);
    const terminating = pods.filter((p) => {
      if (!p.metadata?.deletionTimestamp) return false;
      const asLive: V1Pod = { ...p, metadata: { ...p.metadata, deletionTimestamp: undefined } };
      const v = filterPodsForDrain([asLive], { deleteEmptyDirData: true, force: true, skipSelector });
      return v.evict.length > 0;
    });
    return { verdict: filterPodsForDrain(live, filterOptions), terminating };
  }

  /** Evicts through the Eviction API: `evicted`, `gone` (already gone or replaced), or the PDB that refused. */
  async evict(pod: V1Pod): Promise<'evicted' | 'gone' | PdbBlock> {
    const name = pod.metadata?.name ?? '';
    const namespace = pod.metadata?.namespace ?? '';
    const uid = pod.metadata?.uid;
    try {
      await this.core.createNamespacedPodEviction({
        name,
        namespace,
        body: {
          apiVersion: 'policy/v1',
          kind: 'Eviction',
          metadata: { name, namespace },
          deleteOptions: {
            ...(this.options.gracePeriodSeconds !== undefined
              ? { gracePeriodSeconds: this.options.gracePeriodSeconds }
              : {}),
            ...(uid ? { preconditions: { uid } } : {}),
          },
        },
      });
      return 'evicted';
    } catch (err) {
      if (isNotFound(err) || isConflict(err)) return 'gone';
      if (isTooManyRequests(err)) return { namespace, pod: name, pdb: await this.pdbFor(pod, err) };
      throw err;
    }
  }

  /** Deletes the pod (grace `gracePeriodSeconds`, the pod's own when unset); false when it was already gone. */
  async remove(pod: V1Pod, gracePeriodSeconds: number | undefined): Promise<boolean> {
    const uid = pod.metadata?.uid;
    try {
      await this.core.deleteNamespacedPod({
        name: pod.metadata?.name ?? '',
        namespace: pod.metadata?.namespace ?? '',
        ...(gracePeriodSeconds !== undefined ? { gracePeriodSeconds } : {}),
        body: {
          ...(gracePeriodSeconds !== undefined ? { gracePeriodSeconds } : {}),
          ...(uid ? { preconditions: { uid } } : {}),
        },
      });
      return true;
    } catch (err) {
      if (isNotFound(err) || isConflict(err)) return false;
      throw err;
    }
  }

  /** The PodDisruptionBudget(s) covering the pod; else the name in the API's refusal; else `unknown`. */
  private async pdbFor(pod: V1Pod, err: unknown): Promise<string> {
    const namespace = pod.metadata?.namespace ?? '';
    let pdbs = this.pdbs.get(namespace);
    if (!pdbs) {
      pdbs = await listPaged(this.kc, `PodDisruptionBudgets in namespace ${namespace}`, (page) =>
        this.policy.listNamespacedPodDisruptionBudget({ namespace, ...page }),
      );
      this.pdbs.set(namespace, pdbs);
    }
    const labels = pod.metadata?.labels ?? {};
    const names = pdbs
      .filter((b) => pdbSelectorMatches(b.spec?.selector, labels))
      .map((b) => b.metadata?.name ?? '')
      .sort();
    if (names.length > 0) return names.join(',');
    return /disruption budget ([a-z0-9][-a-z0-9.]*)/.exec(errorText(err))?.[1] ?? 'unknown';
  }
}

function errorText(err: unknown): string {
  if (isRecord(err) && 'body' in err) {
    const body = err.body;
    return typeof body === 'string' ? body : JSON.stringify(body ?? '');
  }
  return err instanceof Error ? err.message : String(err);
}

// The fleet benchmark's management cluster (`--management testbed`): the project's test bed
// (scripts/testbed.sh, management API server only) holding a Cluster for every cluster whose
// hook calls the api checks, so that a start or signal pays for the request check's real read
// (docs/request-checks.md) and the worker's Events land. Without it the stack runs with
// HOOK_REQUEST_CHECKS=off and no management cluster, as before.
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { KubeConfig } from '@kubernetes/client-node';
import {
  capiCluster,
  createCapiObject,
  createNamespace,
  managementApi,
  type CapiObject,
} from '../../support/testbed-fixtures.ts';
import { ownedTempDir, reapOrphanedDirs } from '../../support/owned-dirs.ts';
import { forEachLimit } from './load.ts';

const execFileAsync = promisify(execFile);

export interface FleetManagement {
  /** The management cluster's kubeconfig file, for MANAGEMENT_KUBECONFIG of both processes. */
  kubeconfig: string;
  /**
   * Creates Cluster `names[k]` in `namespace` with spec.topology.version `version` for each k,
   * and returns their uids in the same order (the api's check compares the request's uid).
   */
  createClusters(namespace: string, names: readonly string[], version: string): Promise<string[]>;
}

const DIR_PREFIX = 'capi-uo-bench-mgmt-';

/** A new directory for a management test bed, owned by this process. */
export function fleetManagementDir(): string {
  return ownedTempDir(DIR_PREFIX);
}

/**
 * Takes down the management test beds (an API server and etcd each) that benchmarks killed
 * beyond their cleanup (SIGKILL, a lost session) left running.
 */
export async function reapStaleFleetManagement(root: string, log: (line: string) => void): Promise<void> {
  const reaped = await reapOrphanedDirs(DIR_PREFIX, (dir) => stopFleetManagement(root, dir));
  for (const { dir, owner } of reaped) log(`took down ${dir}: left running by benchmark process ${owner}, now gone`);
}

/** Takes the test bed under `dir` down: safe to repeat, and after a start cut short. */
export async function stopFleetManagement(root: string, dir: string): Promise<void> {
  await execFileAsync(join(root, 'scripts/testbed.sh'), ['down', dir], { maxBuffer: 16 << 20 }).catch(() => undefined);
}

/** Brings up a management-only test bed under `dir` (needs `source scripts/env.sh --testbed`). */
export async function startFleetManagement(
  root: string,
  dir: string,
  log: (line: string) => void,
): Promise<FleetManagement> {
  const started = performance.now();
  try {
    await execFileAsync(join(root, 'scripts/testbed.sh'), ['up', dir], {
      maxBuffer: 16 << 20,
      env: { ...process.env, TESTBED_MANAGEMENT_ONLY: '1' },
    });
  } catch (err) {
    await stopFleetManagement(root, dir);
    throw err;
  }
  const { managementKubeconfig } = JSON.parse(readFileSync(join(dir, 'testbed.json'), 'utf8')) as {
    managementKubeconfig: string;
  };
  log(`management test bed up in ${((performance.now() - started) / 1000).toFixed(1)} s`);
  const kc = new KubeConfig();
  kc.loadFromFile(managementKubeconfig);
  const api = managementApi(kc);
  return {
    kubeconfig: managementKubeconfig,
    async createClusters(namespace, names, version) {
      await createNamespace(api.core, namespace);
      const uids: string[] = new Array<string>(names.length);
      const t0 = performance.now();
      await forEachLimit(
        names.map((name, k) => ({ name, k })),
        16,
        async ({ name, k }) => {
          const created = (await createCapiObject(
            api.custom,
            capiCluster(name, namespace, { version }),
          )) as CapiObject & {
            metadata: { uid: string };
          };
          uids[k] = created.metadata.uid;
        },
      );
      log(
        `  ${names.length} Clusters in ${namespace} (topology ${version}) in ${((performance.now() - t0) / 1000).toFixed(1)} s`,
      );
      return uids;
    },
  };
}

/**
 * The api's request-check counts by hook and result (capi_upgrade_hook_request_checks_total), one
 * line each: the proof that the run's starts and signals were checked, and that none was refused.
 */
export async function requestCheckCounts(opsUrl: string): Promise<string> {
  const text = await (await fetch(`${opsUrl}/metrics`)).text();
  const lines = text
    .split('\n')
    .filter((l) => l.startsWith('capi_upgrade_hook_request_checks_total{'))
    .map((l) => `  ${l}`);
  return lines.length > 0 ? lines.join('\n') : '  (none counted)';
}

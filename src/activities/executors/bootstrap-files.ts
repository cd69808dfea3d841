// The bootstrap files a node update must write, read inside the activity from
// the desired KubeadmConfig in the management cluster (CAPI applies it before
// it calls UpdateMachine). Their contents are often secrets (tokens, keys), so
// they travel by reference: never through workflow inputs, results or history.
import { CoreV1Api, CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import { ApplicationFailure } from '@temporalio/common';
import { isNotFound } from '../kube.ts';
import { MACHINE_UPDATE_FAILURES } from '../machine-update-common.ts';
import type { MachineRef } from '../machine-update-types.ts';

/** One KubeadmConfig `spec.files` entry, with `contentFrom` resolved into `content`. */
export interface BootstrapFile {
  path: string;
  content: string;
  owner?: string;
  permissions?: string;
  encoding?: string;
  append?: boolean;
}

interface KubeadmConfigFile {
  path?: string;
  content?: string;
  owner?: string;
  permissions?: string;
  encoding?: string;
  append?: boolean;
  contentFrom?: { secret?: { name?: string; key?: string } };
}

/** `spec.files` of KubeadmConfig `ref`, each file's `contentFrom` Secret read (same namespace). */
export async function readBootstrapFiles(management: KubeConfig, ref: MachineRef): Promise<BootstrapFile[]> {
  const where = `KubeadmConfig ${ref.namespace}/${ref.name}`;
  let config: { spec?: { files?: KubeadmConfigFile[] } };
  try {
    config = (await management.makeApiClient(CustomObjectsApi).getNamespacedCustomObject({
      group: 'bootstrap.cluster.x-k8s.io',
      version: 'v1beta2',
      plural: 'kubeadmconfigs',
      namespace: ref.namespace,
      name: ref.name,
    })) as typeof config;
  } catch (err) {
    if (isNotFound(err))
      throw ApplicationFailure.nonRetryable(`${where} not found`, MACHINE_UPDATE_FAILURES.invalidInput);
    throw err;
  }
  const core = management.makeApiClient(CoreV1Api);
  const files: BootstrapFile[] = [];
  for (const [i, f] of (config.spec?.files ?? []).entries()) {
    if (!f.path)
      throw ApplicationFailure.nonRetryable(
        `${where}: spec.files[${i}] has no path`,
        MACHINE_UPDATE_FAILURES.invalidInput,
      );
    let content = f.content ?? '';
    const secret = f.contentFrom?.secret;
    if (secret?.name && secret.key) {
      const what = `Secret ${ref.namespace}/${secret.name} key ${secret.key} (file ${f.path})`;
      let data: Record<string, string> | undefined;
      try {
        data = (await core.readNamespacedSecret({ name: secret.name, namespace: ref.namespace })).data;
      } catch (err) {
        if (isNotFound(err))
          throw ApplicationFailure.nonRetryable(`${what} not found`, MACHINE_UPDATE_FAILURES.invalidInput);
        throw err;
      }
      const value = data?.[secret.key];
      if (value === undefined)
        throw ApplicationFailure.nonRetryable(`${what} not found`, MACHINE_UPDATE_FAILURES.invalidInput);
      content = Buffer.from(value, 'base64').toString('utf8');
    }
    files.push({
      path: f.path,
      content,
      ...(f.owner ? { owner: f.owner } : {}),
      ...(f.permissions ? { permissions: f.permissions } : {}),
      ...(f.encoding ? { encoding: f.encoding } : {}),
      ...(f.append ? { append: f.append } : {}),
    });
  }
  return files;
}

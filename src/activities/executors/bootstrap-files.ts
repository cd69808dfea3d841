// The bootstrap files a node update must write, read inside the activity from
// the desired KubeadmConfig in the management cluster (CAPI applies it before
// it calls UpdateMachine). Their contents are often secrets (tokens, keys), so
// they travel by reference: never through workflow inputs, results or history.
import { gunzipSync } from 'node:zlib';
import {
  CoreV1Api,
  CustomObjectsApi,
  type KubeConfig,
  type V1ObjectMeta,
  type V1Secret,
} from '@kubernetes/client-node';
import { ApplicationFailure } from '@temporalio/common';
import { apiClient, isConflict, isNotFound } from '../kube.ts';
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
    config = (await apiClient(management, CustomObjectsApi).getNamespacedCustomObject({
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
  const core = apiClient(management, CoreV1Api);
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

/** The object a files Secret belongs to (a Job, a NodeUpgradeRequest): deleted with it. */
export interface FilesOwner {
  apiVersion: string;
  kind: string;
  metadata: V1ObjectMeta;
}

/**
 * The Secret a node-side upgrader reads the files from: named `<owner>-files`, one key per
 * file (`f0`, `f1`, … with the bytes as they go on disk) and a `manifest` of
 * `<key> <mode> <owner> <path>` lines. Owned by `owner`, so it goes with it.
 */
export function filesSecret(owner: FilesOwner, files: readonly BootstrapFile[]): V1Secret {
  const data: Record<string, string> = {};
  const manifest: string[] = [];
  files.forEach((f, i) => {
    if (f.append)
      throw ApplicationFailure.nonRetryable(
        `bootstrap file ${f.path}: append is not supported in place`,
        MACHINE_UPDATE_FAILURES.invalidInput,
      );
    const key = `f${i}`;
    data[key] = fileBytes(f).toString('base64');
    manifest.push(`${key} ${f.permissions ?? '0644'} ${f.owner ?? '-'} ${f.path}`);
  });
  data.manifest = Buffer.from(`${manifest.join('\n')}\n`).toString('base64');
  const meta = owner.metadata;
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: {
      name: filesSecretName(meta.name!),
      namespace: meta.namespace!,
      labels: { ...meta.labels },
      ownerReferences: [
        { apiVersion: owner.apiVersion, kind: owner.kind, name: meta.name!, uid: meta.uid!, controller: true },
      ],
    },
    type: 'Opaque',
    data,
  };
}

export function filesSecretName(ownerName: string): string {
  return `${ownerName}-files`;
}

/** A file's bytes as they go on disk (KubeadmConfig `encoding`: base64, gzip, gzip+base64). */
function fileBytes(f: BootstrapFile): Buffer {
  switch (f.encoding ?? '') {
    case '':
      return Buffer.from(f.content, 'utf8');
    case 'base64':
      return Buffer.from(f.content, 'base64');
    case 'gzip':
      return gunzipSync(Buffer.from(f.content, 'binary'));
    case 'gzip+base64':
      return gunzipSync(Buffer.from(f.content, 'base64'));
    default:
      throw ApplicationFailure.nonRetryable(
        `bootstrap file ${f.path}: unknown encoding ${JSON.stringify(f.encoding)}`,
        MACHINE_UPDATE_FAILURES.invalidInput,
      );
  }
}

/** Creates the files Secret of `owner` unless it exists. */
export async function ensureFilesSecret(
  kc: KubeConfig,
  owner: FilesOwner,
  files: readonly BootstrapFile[],
): Promise<void> {
  const body = filesSecret(owner, files);
  try {
    await apiClient(kc, CoreV1Api).createNamespacedSecret({ namespace: body.metadata!.namespace!, body });
  } catch (err) {
    if (!isConflict(err)) throw err;
  }
}

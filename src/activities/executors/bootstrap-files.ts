// The bootstrap files a node update must write, read inside the activity from
// the desired KubeadmConfig in the management cluster (CAPI applies it before
// it calls UpdateMachine). Their contents are often secrets (tokens, keys), so
// they travel by reference: never through workflow inputs, results or history.
// Every file is bounded before and while it is decoded (a 0.9 MB gzip file can
// inflate to 700 MB): all of them go into one Secret, which Kubernetes caps at 1 MiB.
import { gunzipSync } from 'node:zlib';
import {
  CoreV1Api,
  CustomObjectsApi,
  type KubeConfig,
  type V1ObjectMeta,
  type V1Secret,
} from '@kubernetes/client-node';
import { ApplicationFailure } from '@temporalio/common';
import { apiClient } from '../../platform/kube/clients.ts';
import { isConflict, isNotFound } from '../../platform/kube/errors.ts';
import { MACHINE_UPDATE_FAILURES } from '../machine-update-common.ts';
import type { MachineRef, NodeUpgradeInput } from '../machine-update-types.ts';
import { CAPI_BOOTSTRAP } from '../../platform/kube/capi-api.ts';

/** One KubeadmConfig `spec.files` entry: `contentFrom` resolved, `encoding` decoded. */
export interface BootstrapFile {
  path: string;
  /** The bytes as they go on disk. */
  bytes: Buffer;
  owner?: string;
  permissions?: string;
}

/**
 * The decoded size of all bootstrap files of one update together: they travel in one Secret,
 * which Kubernetes caps at 1 MiB (the rest is room for the manifest and base64's keys).
 */
export const MAX_BOOTSTRAP_FILES_BYTES = 960 * 1024;
/** A file's content as written (base64, gzip+base64...), checked before it is decoded at all. */
export const MAX_ENCODED_FILE_BYTES = 2 * 1024 * 1024;

interface KubeadmConfigFile {
  path?: string;
  content?: string;
  owner?: string;
  permissions?: string;
  encoding?: string;
  append?: boolean;
  contentFrom?: { secret?: { name?: string; key?: string } };
}

/** What an executor is given: the input with its bootstrap files read (they are never in the input). */
export type ResolvedNodeUpgrade = Omit<NodeUpgradeInput, 'files'> & { files: readonly BootstrapFile[] };

/**
 * `input` with the files of its KubeadmConfig (`bootstrapConfig`) read from the management
 * cluster. Files inline in the input (only a v1 machine update carried them: secrets in the
 * workflow history) are refused: such an update fails, and CAPI's next UpdateMachine after an
 * abort starts a v2 one that passes the KubeadmConfig by reference.
 */
export async function resolveBootstrapFiles(
  management: KubeConfig,
  input: NodeUpgradeInput,
): Promise<ResolvedNodeUpgrade> {
  const { files: inline, ...rest } = input;
  if (Array.isArray(inline) && inline.length > 0)
    throw ApplicationFailure.nonRetryable(
      `this update carries ${inline.length} bootstrap file(s) inline in its workflow input, which is no longer ` +
        'accepted (file contents must not enter workflow history): abort it, and the next UpdateMachine reads ' +
        'them from the KubeadmConfig',
      MACHINE_UPDATE_FAILURES.invalidInput,
    );
  return { ...rest, files: input.bootstrapConfig ? await readBootstrapFiles(management, input.bootstrapConfig) : [] };
}

/** `spec.files` of KubeadmConfig `ref`, each file's `contentFrom` Secret read (same namespace). */
export async function readBootstrapFiles(management: KubeConfig, ref: MachineRef): Promise<BootstrapFile[]> {
  const where = `KubeadmConfig ${ref.namespace}/${ref.name}`;
  let config: { spec?: { files?: KubeadmConfigFile[] } };
  try {
    config = (await apiClient(management, CustomObjectsApi).getNamespacedCustomObject({
      ...CAPI_BOOTSTRAP,
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
  let total = 0;
  for (const [i, f] of (config.spec?.files ?? []).entries()) {
    if (!f.path)
      throw ApplicationFailure.nonRetryable(
        `${where}: spec.files[${i}] has no path`,
        MACHINE_UPDATE_FAILURES.invalidInput,
      );
    if (f.append)
      throw ApplicationFailure.nonRetryable(
        `bootstrap file ${f.path}: append is not supported in place`,
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
      // (Secret data is base64: 4 characters per 3 bytes.)
      encodedWithin(f.path, Math.floor((value.length * 3) / 4));
      content = Buffer.from(value, 'base64').toString('utf8');
    }
    const bytes = fileBytes(f.path, content, f.encoding, MAX_BOOTSTRAP_FILES_BYTES - total);
    total += bytes.length;
    files.push({
      path: f.path,
      bytes,
      ...(f.owner ? { owner: f.owner } : {}),
      ...(f.permissions ? { permissions: f.permissions } : {}),
    });
  }
  return files;
}

function encodedWithin(path: string, length: number): void {
  if (length > MAX_ENCODED_FILE_BYTES)
    throw ApplicationFailure.nonRetryable(
      `bootstrap file ${path}: its encoded content is over the ${MAX_ENCODED_FILE_BYTES}-byte limit`,
      MACHINE_UPDATE_FAILURES.invalidInput,
    );
}

function tooLarge(path: string): ApplicationFailure {
  return ApplicationFailure.nonRetryable(
    `bootstrap file ${path}: over the ${MAX_BOOTSTRAP_FILES_BYTES}-byte limit for all bootstrap files of an update ` +
      '(they travel in one Secret, which Kubernetes caps at 1 MiB)',
    MACHINE_UPDATE_FAILURES.invalidInput,
  );
}

/**
 * A file's bytes as they go on disk (KubeadmConfig `encoding`: base64, gzip, gzip+base64), at
 * most `room` of them: the input is bounded before decoding, gzip is inflated with an output cap
 * (never more than `room` + one chunk in memory).
 */
function fileBytes(path: string, content: string, encoding: string | undefined, room: number): Buffer {
  encodedWithin(path, content.length);
  let bytes: Buffer;
  switch (encoding ?? '') {
    case '':
      bytes = Buffer.from(content, 'utf8');
      break;
    case 'base64':
      bytes = Buffer.from(content, 'base64');
      break;
    case 'gzip':
      bytes = inflate(path, Buffer.from(content, 'binary'), room);
      break;
    case 'gzip+base64':
      bytes = inflate(path, Buffer.from(content, 'base64'), room);
      break;
    default:
      throw ApplicationFailure.nonRetryable(
        `bootstrap file ${path}: unknown encoding ${JSON.stringify(encoding)}`,
        MACHINE_UPDATE_FAILURES.invalidInput,
      );
  }
  if (bytes.length > room) throw tooLarge(path);
  return bytes;
}

function inflate(path: string, gz: Buffer, room: number): Buffer {
  try {
    // One byte over the room tells "too large" from "exactly full".
    return gunzipSync(gz, { maxOutputLength: room + 1 });
  } catch (err) {
    if (err instanceof RangeError) throw tooLarge(path);
    const code = typeof err === 'object' && err !== null && 'code' in err ? String(err.code) : 'error';
    throw ApplicationFailure.nonRetryable(
      `bootstrap file ${path}: not valid gzip (${code})`,
      MACHINE_UPDATE_FAILURES.invalidInput,
    );
  }
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
    const key = `f${i}`;
    data[key] = f.bytes.toString('base64');
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

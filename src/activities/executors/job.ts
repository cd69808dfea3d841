// The `job` node-upgrade executor: a privileged Job pinned to the node that runs
// upgrade-node.sh against the host's root (chroot), for nodes without an agent.
// Bootstrap files go in a Secret owned by the Job, never in its spec. upgradeNode creates the Job once (named after the workflow, so a retry
// finds it); its completion is read by the caller (a polling activity or the
// async-completion watch).
import { readFileSync } from 'node:fs';
import {
  BatchV1Api,
  CoreV1Api,
  type KubeConfig,
  type V1Job,
  type V1JobCondition,
  type V1Node,
} from '@kubernetes/client-node';
import { ApplicationFailure } from '@temporalio/common';
import {
  BINARY_VOLUME_MOUNT,
  DEFAULT_JOB_IMAGE,
  NODE_BINARIES,
  type BinaryVolume,
  type NodeBinary,
} from '../../domain/node-binaries.ts';
import { apiClient } from '../../platform/kube/clients.ts';
import { isConflict, isNotFound } from '../../platform/kube/errors.ts';
import { watchObject } from '../object-watch.ts';
import {
  MACHINE_UPDATE_FAILURES,
  MANAGED_BY,
  MANAGED_BY_LABEL,
  MANAGED_BY_SELECTOR,
  nodeLabel,
  seconds,
  truncate,
  type NodeUpgradeExecution,
} from '../machine-update-common.ts';
import { ensureFilesSecret, filesSecretName, type ResolvedNodeUpgrade } from './bootstrap-files.ts';
import { binaryVolumeSource, jobBinarySource, pinnedBinaryDigests } from './node-binaries.ts';
import { readNodeOrFail } from '../node-reads.ts';
import { failedScriptLine, lastFailedPodLog, UPGRADE_CONTAINER } from './job-pods.ts';
import { kubeletMatches } from '../../domain/cluster-health.ts';

/** Configuration of the `job` executor (docs/node-upgrade-job.md). */
export interface JobExecutorConfig {
  /** Image with sh, chroot, sha256sum and curl or wget; default {@link DEFAULT_JOB_IMAGE} (by digest). */
  image?: string;
  /** Where the script downloads kubeadm, kubelet and kubectl (BINARY_SOURCE); default dl.k8s.io, or the volume. */
  binarySource?: string;
  /** Lets the script accept an http:// binary source (the pinned checksums still apply). */
  allowHttpBinarySource?: boolean;
  /** The pinned checksums (`<version>/<arch>/<binary>: <sha256>` lines), read when a Job is created. */
  checksumsFile?: string;
  /** Pre-staged binaries (air-gapped), mounted read-only at {@link BINARY_VOLUME_MOUNT}. */
  binaryVolume?: BinaryVolume;
  /** kubeadm preflight checks `kubeadm upgrade` ignores (e.g. SystemVerification on cgroup v1 hosts). */
  ignorePreflightErrors?: readonly string[];
  /** Shell script run on the host; default {@link DEFAULT_JOB_SCRIPT}. */
  script?: string;
  /** Job spec.backoffLimit; default 2. */
  backoffLimit?: number;
}

/** The failure message with the script's error line (CAPI cuts error bodies at 512 characters). */
const MAX_JOB_FAILURE_MESSAGE = 400;
/** The Job executor gives up this long after the Job's own deadline should have ended it. */
const JOB_DEADLINE_SLACK_MS = 30_000;
const CONTROL_PLANE_LABEL = 'node-role.kubernetes.io/control-plane';

export { DEFAULT_JOB_IMAGE };

/**
 * The node upgrade script (seed 003), shipped next to this module (the image copies it into
 * dist/): its header is the contract the Job below fulfils (environment, mounts, exit codes).
 */
export const DEFAULT_JOB_SCRIPT = readFileSync(new URL('./upgrade-node.sh', import.meta.url), 'utf8');

/** Where the Job mounts the host's root filesystem and the bootstrap files Secret. */
const HOST_ROOT = '/host';
const FILES_DIR = '/files';

export interface UpgradeJobParams {
  name: string;
  namespace: string;
  nodeName: string;
  version: string;
  mode: 'apply' | 'node';
  image: string;
  script: string;
  backoffLimit: number;
  timeoutMs: number;
  /** Secret holding the bootstrap files and their manifest (see {@link filesSecret}); none = no files. */
  filesSecretName?: string;
  /** BINARY_SOURCE for the script; unset = its default (dl.k8s.io). */
  binarySource?: string;
  allowHttpBinarySource?: boolean;
  /** The node's architecture (its kubelet's report) and the pinned sha256 of each binary for it. */
  arch: string;
  digests: Record<NodeBinary, string>;
  binaryVolume?: BinaryVolume;
  ignorePreflightErrors?: readonly string[];
}

/** The privileged Job that runs the node upgrade script on the node (pure: no I/O). */
export function upgradeJob(p: UpgradeJobParams): V1Job {
  const labels: Record<string, string> = { [MANAGED_BY_LABEL]: MANAGED_BY, ...nodeLabel(p.nodeName) };
  return {
    apiVersion: 'batch/v1',
    kind: 'Job',
    metadata: { name: p.name, namespace: p.namespace, labels },
    spec: {
      backoffLimit: p.backoffLimit,
      activeDeadlineSeconds: Math.max(1, Math.ceil(p.timeoutMs / 1000)),
      ttlSecondsAfterFinished: 86_400,
      template: {
        metadata: { labels },
        spec: {
          nodeName: p.nodeName,
          hostPID: true,
          hostNetwork: true,
          restartPolicy: 'Never',
          // Runs on the cordoned node whatever its taints.
          tolerations: [{ operator: 'Exists' }],
          containers: [
            {
              name: UPGRADE_CONTAINER,
              image: p.image,
              // The script reaches the host through chroot HOST_ROOT (the image needs sh, chroot,
              // sha256sum and curl or wget: busybox/alpine has them).
              command: ['/bin/sh', '-c'],
              args: [p.script],
              env: [
                { name: 'KUBERNETES_VERSION', value: p.version },
                { name: 'UPGRADE_MODE', value: p.mode },
                { name: 'NODE_NAME', value: p.nodeName },
                { name: 'HOST_ROOT', value: HOST_ROOT },
                ...(p.filesSecretName ? [{ name: 'FILES_DIR', value: FILES_DIR }] : []),
                ...(p.binarySource ? [{ name: 'BINARY_SOURCE', value: p.binarySource }] : []),
                ...(p.allowHttpBinarySource ? [{ name: 'BINARY_SOURCE_ALLOW_HTTP', value: '1' }] : []),
                ...(p.ignorePreflightErrors?.length
                  ? [{ name: 'IGNORE_PREFLIGHT_ERRORS', value: p.ignorePreflightErrors.join(',') }]
                  : []),
                { name: 'ARCH', value: p.arch },
                ...NODE_BINARIES.map((b) => ({ name: `${b.toUpperCase()}_SHA256`, value: p.digests[b] })),
              ],
              securityContext: { privileged: true },
              volumeMounts: [
                { name: 'host', mountPath: HOST_ROOT },
                ...(p.filesSecretName ? [{ name: 'files', mountPath: FILES_DIR, readOnly: true }] : []),
                ...(p.binaryVolume ? [{ name: 'binaries', mountPath: BINARY_VOLUME_MOUNT, readOnly: true }] : []),
              ],
            },
          ],
          volumes: [
            { name: 'host', hostPath: { path: '/' } },
            // The Secret is created right after the Job (owned by it): the pod waits for it.
            ...(p.filesSecretName
              ? [{ name: 'files', secret: { secretName: p.filesSecretName, defaultMode: 0o400 } }]
              : []),
            ...(p.binaryVolume ? [binaryVolumeSource(p.binaryVolume)] : []),
          ],
        },
      },
    },
  };
}

/** The node's upgrade Job: created once (named after the workflow, so a retry finds it), then read. */
/** The Job that upgrades `input.nodeName`: its kubelet's architecture picks the pinned checksums. */
async function upgradeJobFor(
  kc: KubeConfig,
  namespace: string,
  config: JobExecutorConfig,
  input: ResolvedNodeUpgrade,
): Promise<V1Job> {
  const name = input.requestName;
  const files = input.files;
  const core = apiClient(kc, CoreV1Api);
  const node = await readNodeOrFail(core, input.nodeName);
  const arch = node.status?.nodeInfo?.architecture;
  if (!arch)
    throw ApplicationFailure.nonRetryable(
      `node ${input.nodeName} reports no architecture (status.nodeInfo.architecture): cannot pick pinned checksums`,
      MACHINE_UPDATE_FAILURES.invalidInput,
    );
  const digests = pinnedBinaryDigests(config.checksumsFile, input.version, arch);
  const binarySource = jobBinarySource(config);
  return upgradeJob({
    name,
    namespace,
    nodeName: input.nodeName,
    version: input.version,
    mode: await upgradeMode(core, node, input.version),
    image: config.image ?? DEFAULT_JOB_IMAGE,
    script: config.script ?? DEFAULT_JOB_SCRIPT,
    backoffLimit: config.backoffLimit ?? 2,
    timeoutMs: input.timeoutMs,
    arch,
    digests,
    ...(files.length > 0 ? { filesSecretName: filesSecretName(name) } : {}),
    ...(binarySource ? { binarySource } : {}),
    ...(config.allowHttpBinarySource ? { allowHttpBinarySource: true } : {}),
    ...(config.binaryVolume ? { binaryVolume: config.binaryVolume } : {}),
    ...(config.ignorePreflightErrors?.length ? { ignorePreflightErrors: config.ignorePreflightErrors } : {}),
  });
}

/** Why the Job failed, with the last line its script wrote or its last pod's failure (read now: the pods go with the Job). */
async function jobFailure(
  kc: KubeConfig,
  namespace: string,
  name: string,
  failed: V1JobCondition,
): Promise<ApplicationFailure> {
  const where = `node upgrade Job ${namespace}/${name}`;
  // The pods go with the Job at cleanup: their log is read now or never.
  const log = await lastFailedPodLog(apiClient(kc, CoreV1Api), namespace, name);
  const why = failedScriptLine(log.lines) ?? (log.podFailure ? `its last pod: ${log.podFailure}` : undefined);
  return ApplicationFailure.create({
    message: truncate(
      `${where} failed: ${failed.reason ?? 'Failed'}${failed.message ? `: ${failed.message}` : ''}` +
        (why ? `; ${why}` : ''),
      MAX_JOB_FAILURE_MESSAGE,
    ),
    type: MACHINE_UPDATE_FAILURES.nodeUpgradeJobFailed,
    nonRetryable: true,
    details: [log],
  });
}

export function jobExecution(
  kc: KubeConfig,
  namespace: string,
  config: JobExecutorConfig,
  input: ResolvedNodeUpgrade,
): NodeUpgradeExecution {
  const batch = apiClient(kc, BatchV1Api);
  const name = input.requestName;
  const where = `node upgrade Job ${namespace}/${name}`;
  const files = input.files;
  const read = async (): Promise<V1Job | undefined> => {
    try {
      return await batch.readNamespacedJob({ name, namespace });
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  };
  const ensure = async (): Promise<V1Job> => {
    const existing = await read();
    if (existing) {
      // A retry after a crash between the Job and its Secret: the pod waits for the Secret.
      if (files.length > 0) await ensureFilesSecret(kc, filesOwner(existing), files);
      return existing;
    }
    const body = await upgradeJobFor(kc, namespace, config, input);
    let job: V1Job;
    try {
      job = await batch.createNamespacedJob({ namespace, body });
    } catch (err) {
      if (isConflict(err)) return (await read()) ?? (await ensure());
      throw err;
    }
    if (files.length > 0) await ensureFilesSecret(kc, filesOwner(job), files);
    return job;
  };

  return {
    async ensure() {
      await ensure();
    },
    changes: (onChange) =>
      watchObject(
        kc,
        { path: `/apis/batch/v1/namespaces/${namespace}/jobs`, labelSelector: MANAGED_BY_SELECTOR },
        name,
        onChange,
      ),
    async check(startedAtMs) {
      // Deleted by someone meanwhile: create it again.
      const job = (await read()) ?? (await ensure());
      const conditions = job.status?.conditions ?? [];
      if (conditions.some((c) => c.type === 'Complete' && c.status === 'True'))
        return { done: true, message: `${where} completed on node ${input.nodeName}` };
      const failed = conditions.find((c) => c.type === 'Failed' && c.status === 'True');
      if (failed) {
        throw await jobFailure(kc, namespace, name, failed);
      }
      const s = job.status;
      const observed = `active ${s?.active ?? 0}, succeeded ${s?.succeeded ?? 0}, failed ${s?.failed ?? 0}`;
      if (Date.now() - startedAtMs > input.timeoutMs + JOB_DEADLINE_SLACK_MS) {
        throw ApplicationFailure.nonRetryable(
          `${where} not finished within ${seconds(input.timeoutMs)} (${observed})`,
          MACHINE_UPDATE_FAILURES.nodeUpgradeTimeout,
        );
      }
      return { done: false, observed };
    },
  };
}

/**
 * `apply` on the first control-plane node of an upgrade (the kubeadm ClusterConfiguration is
 * not at the target version yet), else `node`.
 */
async function upgradeMode(core: CoreV1Api, node: V1Node, version: string): Promise<'apply' | 'node'> {
  if (node.metadata?.labels?.[CONTROL_PLANE_LABEL] === undefined) return 'node';
  let config: string | undefined;
  try {
    config = (await core.readNamespacedConfigMap({ name: 'kubeadm-config', namespace: 'kube-system' })).data
      ?.ClusterConfiguration;
  } catch (err) {
    if (!isNotFound(err)) throw err;
  }
  const current = config ? /^kubernetesVersion:\s*["']?([^\s"']+)/m.exec(config)?.[1] : undefined;
  return current !== undefined && !kubeletMatches(current, version) ? 'apply' : 'node';
}

/** Deletes the upgrade Job `name` and its pods (abort, cleanup); gone already is fine. */
export async function deleteUpgradeJob(kc: KubeConfig, namespace: string, name: string): Promise<void> {
  try {
    await apiClient(kc, BatchV1Api).deleteNamespacedJob({ name, namespace, propagationPolicy: 'Background' });
  } catch (err) {
    if (!isNotFound(err)) throw err;
  }
}

function filesOwner(job: V1Job) {
  return { apiVersion: 'batch/v1', kind: 'Job', metadata: job.metadata! };
}

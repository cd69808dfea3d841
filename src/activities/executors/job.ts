// The `job` node-upgrade executor: a privileged Job pinned to the node that runs
// an upgrade script in the host's namespaces (nsenter), for nodes without an
// agent. upgradeNode creates the Job once (named after the workflow, so a retry
// finds it) and waits for it to complete or fail.
import { BatchV1Api, CoreV1Api, type KubeConfig, type V1Job } from '@kubernetes/client-node';
import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import { isConflict, isNotFound } from '../kube.ts';
import {
  MACHINE_UPDATE_FAILURES,
  MANAGED_BY,
  MANAGED_BY_LABEL,
  nodeLabel,
  seconds,
  type WaitCheckpoint,
} from '../machine-update-common.ts';
import type { NodeUpgradeInput } from '../machine-update-types.ts';
import { readNodeOrFail } from '../node.ts';
import { kubeletMatches } from '../upgrade.ts';

/** Configuration of the `job` executor. */
export interface JobExecutorConfig {
  /** Image with `nsenter` (the script runs in the host's namespaces); default {@link DEFAULT_JOB_IMAGE}. */
  image?: string;
  /** Shell script run on the host; default {@link DEFAULT_JOB_SCRIPT}. */
  script?: string;
  /** Job spec.backoffLimit; default 2. */
  backoffLimit?: number;
}

/** The Job executor gives up this long after the Job's own deadline should have ended it. */
const JOB_DEADLINE_SLACK_MS = 30_000;
const CONTROL_PLANE_LABEL = 'node-role.kubernetes.io/control-plane';

export const DEFAULT_JOB_IMAGE = 'docker.io/library/alpine:3.22';

/**
 * The default node upgrade script. It runs as root in the host's namespaces with
 * KUBERNETES_VERSION (e.g. v1.33.1), UPGRADE_MODE (`apply` on the first control-plane node,
 * else `node`) and NODE_NAME set.
 */
export const DEFAULT_JOB_SCRIPT = `set -eu
VERSION="\${KUBERNETES_VERSION#v}"
MINOR="$(echo "$VERSION" | cut -d. -f1-2)"
log() { echo "[node-upgrade] $*"; }
if command -v apt-get >/dev/null 2>&1; then
  # pkgs.k8s.io has one repository per minor version.
  for f in /etc/apt/sources.list.d/kubernetes.list /etc/apt/sources.list.d/kubernetes.sources; do
    if [ -f "$f" ]; then sed -i -E "s#/v[0-9]+\\.[0-9]+/#/v$MINOR/#g" "$f"; fi
  done
  apt-get update -q
  install_pkgs() {
    pkgs=""
    for p in "$@"; do pkgs="$pkgs $p=$VERSION-*"; done
    # shellcheck disable=SC2086
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --allow-change-held-packages $pkgs
    apt-mark hold "$@"
  }
elif command -v dnf >/dev/null 2>&1 || command -v yum >/dev/null 2>&1; then
  PM="$(command -v dnf || command -v yum)"
  if [ -f /etc/yum.repos.d/kubernetes.repo ]; then
    sed -i -E "s#/v[0-9]+\\.[0-9]+/#/v$MINOR/#g" /etc/yum.repos.d/kubernetes.repo
  fi
  install_pkgs() {
    pkgs=""
    for p in "$@"; do pkgs="$pkgs $p-$VERSION"; done
    # shellcheck disable=SC2086
    "$PM" install -y --disableexcludes=kubernetes $pkgs
  }
else
  log "no apt-get, dnf or yum on node $NODE_NAME: cannot install Kubernetes packages"
  exit 1
fi
log "node $NODE_NAME: installing kubeadm $VERSION"
install_pkgs kubeadm
if [ "$UPGRADE_MODE" = apply ]; then
  log "kubeadm upgrade apply v$VERSION (first control-plane node)"
  kubeadm upgrade apply -y "v$VERSION"
else
  log "kubeadm upgrade node"
  kubeadm upgrade node
fi
log "installing kubelet and kubectl $VERSION"
install_pkgs kubelet kubectl
systemctl daemon-reload
systemctl restart kubelet
log "done"
`;

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
              name: 'upgrade',
              image: p.image,
              command: ['nsenter', '--target', '1', '--mount', '--uts', '--ipc', '--net', '--', '/bin/sh', '-c'],
              args: [p.script],
              env: [
                { name: 'KUBERNETES_VERSION', value: p.version },
                { name: 'UPGRADE_MODE', value: p.mode },
                { name: 'NODE_NAME', value: p.nodeName },
              ],
              securityContext: { privileged: true },
              volumeMounts: [{ name: 'host', mountPath: '/host' }],
            },
          ],
          volumes: [{ name: 'host', hostPath: { path: '/' } }],
        },
      },
    },
  };
}

/** Creates the node's upgrade Job unless it exists and waits for it to complete or fail. */
export async function jobUpgrade(
  kc: KubeConfig,
  namespace: string,
  pollMs: number,
  config: JobExecutorConfig,
  input: NodeUpgradeInput,
  startedAtMs: number,
): Promise<{ message: string }> {
  const ctx = Context.current();
  const batch = kc.makeApiClient(BatchV1Api);
  const name = input.requestName;
  const where = `node upgrade Job ${namespace}/${name}`;
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
    if (existing) return existing;
    const body = upgradeJob({
      name,
      namespace,
      nodeName: input.nodeName,
      version: input.version,
      mode: await upgradeMode(kc.makeApiClient(CoreV1Api), input),
      image: config.image ?? DEFAULT_JOB_IMAGE,
      script: config.script ?? DEFAULT_JOB_SCRIPT,
      backoffLimit: config.backoffLimit ?? 2,
      timeoutMs: input.timeoutMs,
    });
    try {
      return await batch.createNamespacedJob({ namespace, body });
    } catch (err) {
      if (isConflict(err)) return (await read()) ?? (await ensure());
      throw err;
    }
  };

  let job = await ensure();
  for (;;) {
    const conditions = job.status?.conditions ?? [];
    const complete = conditions.find((c) => c.type === 'Complete' && c.status === 'True');
    if (complete) return { message: `${where} completed on node ${input.nodeName}` };
    const failed = conditions.find((c) => c.type === 'Failed' && c.status === 'True');
    if (failed) {
      throw ApplicationFailure.nonRetryable(
        `${where} failed: ${failed.reason ?? 'Failed'}${failed.message ? `: ${failed.message}` : ''}`,
        MACHINE_UPDATE_FAILURES.nodeUpgradeJobFailed,
      );
    }
    const s = job.status;
    const observed = `active ${s?.active ?? 0}, succeeded ${s?.succeeded ?? 0}, failed ${s?.failed ?? 0}`;
    ctx.heartbeat({ startedAtMs, observed } satisfies WaitCheckpoint);
    if (Date.now() - startedAtMs > input.timeoutMs + JOB_DEADLINE_SLACK_MS) {
      throw ApplicationFailure.nonRetryable(
        `${where} not finished within ${seconds(input.timeoutMs)} (${observed})`,
        MACHINE_UPDATE_FAILURES.nodeUpgradeTimeout,
      );
    }
    await ctx.sleep(pollMs);
    job = (await read()) ?? (await ensure());
  }
}

/**
 * `apply` on the first control-plane node of an upgrade (the kubeadm ClusterConfiguration is
 * not at the target version yet), else `node`.
 */
async function upgradeMode(core: CoreV1Api, input: NodeUpgradeInput): Promise<'apply' | 'node'> {
  const node = await readNodeOrFail(core, input.nodeName);
  if (node.metadata?.labels?.[CONTROL_PLANE_LABEL] === undefined) return 'node';
  let config: string | undefined;
  try {
    config = (await core.readNamespacedConfigMap({ name: 'kubeadm-config', namespace: 'kube-system' })).data
      ?.ClusterConfiguration;
  } catch (err) {
    if (!isNotFound(err)) throw err;
  }
  const current = config ? /^kubernetesVersion:\s*["']?([^\s"']+)/m.exec(config)?.[1] : undefined;
  return current !== undefined && !kubeletMatches(current, input.version) ? 'apply' : 'node';
}

/** Deletes the upgrade Job `name` and its pods (abort, cleanup); gone already is fine. */
export async function deleteUpgradeJob(kc: KubeConfig, namespace: string, name: string): Promise<void> {
  try {
    await kc.makeApiClient(BatchV1Api).deleteNamespacedJob({ name, namespace, propagationPolicy: 'Background' });
  } catch (err) {
    if (!isNotFound(err)) throw err;
  }
}

// The real clusterctl (CAPI_VERSION's, built into the tool cache by scripts/tools-capi.sh)
// against a management cluster of its own: `scripts/testbed.sh up` with
// TESTBED_MANAGEMENT_ONLY=1 (an API server with Cluster API's and cert-manager's CRDs, no
// workload cluster). Not the tier's shared test bed: `clusterctl delete` removes cluster-wide
// objects and the extension's namespace content, which other files rely on there.
//
// Core CAPI on the test beds is installed without clusterctl (CRDs and local managers), so
// clusterctl's inventory does not know it and `init` would fetch core CAPI from GitHub: this
// records it there (the Provider CRD from CAPI's module, a CoreProvider `cluster-api` in
// capi-system) with CAPI's own metadata.yaml in the local repository.
import { execFile } from 'node:child_process';
import { copyFileSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { PROVIDER_LABEL, PROVIDER_NAME } from '../../scripts/release.ts';

const ROOT = new URL('../../', import.meta.url).pathname;

export function run(
  file: string,
  args: string[],
  options: { env?: Record<string, string>; input?: string; timeoutMs?: number } = {},
): Promise<{ stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = execFile(
      file,
      args,
      { maxBuffer: 16 << 20, timeout: options.timeoutMs ?? 120_000, env: { ...process.env, ...options.env } },
      (err, stdout, stderr) => {
        if (err) reject(new Error(`${file} ${args.join(' ')} failed (${err.message.split('\n')[0]}):\n${stderr}`));
        else resolve({ stdout, stderr });
      },
    );
    child.stdin?.end(options.input ?? '');
  });
}

function required(name: string): string {
  const value = process.env[name];
  if (!value)
    throw new Error(
      `${name} is not set: run the capi tier (make test-capi, or source scripts/env.sh --testbed --capi)`,
    );
  return value;
}

export interface ClusterctlBed {
  dir: string;
  kubeconfig: string;
  kubectl(args: string[], input?: string): Promise<string>;
  /**
   * clusterctl with this bed's clusterctl.yaml and kubeconfig, a config dir of its own and no version check;
   * `extraConfig` is appended to a copy of clusterctl.yaml for this call (e.g. an `images:` section).
   */
  clusterctl(args: string[], env?: Record<string, string>, extraConfig?: string): Promise<string>;
  /** `make release VERSION=<version>` into the local repository; returns the components file's path. */
  release(version: string, image?: string): Promise<string>;
  down(): Promise<void>;
}

export async function startClusterctlBed(dir: string): Promise<ClusterctlBed> {
  const testbed = join(dir, 'testbed');
  await run('bash', [join(ROOT, 'scripts/testbed.sh'), 'up', testbed], {
    env: { TESTBED_MANAGEMENT_ONLY: '1', TESTBED_SUFFIX: `cctl-${process.pid}` },
    timeoutMs: 5 * 60_000,
  });
  const state = JSON.parse(readFileSync(join(testbed, 'testbed.json'), 'utf8')) as {
    managementKubeconfig: string;
    kubectl: string;
  };
  const bed = await clusterctlOn({ dir, kubeconfig: state.managementKubeconfig, kubectlBinary: state.kubectl });
  return {
    ...bed,
    async down() {
      await run('bash', [join(ROOT, 'scripts/testbed.sh'), 'down', testbed]).catch((err: unknown) =>
        console.error(String(err)),
      );
    },
  };
}

/**
 * clusterctl against a management cluster that has Cluster API's and cert-manager's CRDs:
 * core CAPI recorded in its inventory, a local repository, the release written into it.
 */
export async function clusterctlOn(o: {
  dir: string;
  kubeconfig: string;
  kubectlBinary: string;
}): Promise<Omit<ClusterctlBed, 'down'>> {
  const { dir, kubeconfig } = o;
  const repo = join(dir, 'repository');
  const kubectl = async (args: string[], input?: string) =>
    (await run(o.kubectlBinary, ['--kubeconfig', kubeconfig, ...args], input === undefined ? {} : { input })).stdout;
  const clusterctlBinary = required('CLUSTERCTL_BINARY');
  const capiModule = required('CAPI_MODULE_DIR');
  // The release clusterctl and CAPI_MODULE_DIR are (make test-capi CAPI_VERSION=…), not the test
  // bed's CRD release: clusterctl refuses a core provider its own metadata.yaml has no series for.
  const capiVersion = required('CAPI_VERSION');
  const configFile = join(dir, 'clusterctl.yaml');
  const componentsUrl = (label: string, version: string, file: string) => `file://${join(repo, label, version, file)}`;

  // Core CAPI, as installed on the bed, in clusterctl's inventory and local repository.
  const core = join(repo, 'cluster-api', capiVersion);
  mkdirSync(core, { recursive: true });
  copyFileSync(join(capiModule, 'metadata.yaml'), join(core, 'metadata.yaml'));
  await kubectl(['apply', '-f', join(capiModule, 'cmd/clusterctl/config/manifest/clusterctl-api.yaml')]);
  await kubectl(['wait', '--for', 'condition=Established', 'crd/providers.clusterctl.cluster.x-k8s.io']);
  await kubectl(['create', 'namespace', 'capi-system']);
  await kubectl(
    ['apply', '-f', '-'],
    JSON.stringify({
      apiVersion: 'clusterctl.cluster.x-k8s.io/v1alpha3',
      kind: 'Provider',
      metadata: {
        name: 'cluster-api',
        namespace: 'capi-system',
        labels: { 'cluster.x-k8s.io/provider': 'cluster-api', 'clusterctl.cluster.x-k8s.io': '' },
      },
      providerName: 'cluster-api',
      type: 'CoreProvider',
      version: capiVersion,
    }),
  );

  // What a user writes into clusterctl.yaml (docs/release.md); cert-manager is the bed's CRDs.
  writeFileSync(
    configFile,
    [
      'providers:',
      `  - name: ${PROVIDER_NAME}`,
      '    type: RuntimeExtensionProvider',
      `    url: ${componentsUrl(PROVIDER_LABEL, 'latest', 'runtime-extension-components.yaml')}`,
      '  - name: cluster-api',
      '    type: CoreProvider',
      `    url: ${componentsUrl('cluster-api', capiVersion, 'core-components.yaml')}`,
      'cert-manager:',
      '  externallyProvisioned: "true"',
      '',
    ].join('\n'),
  );

  let extraConfigs = 0;
  return {
    dir,
    kubeconfig,
    kubectl,
    async clusterctl(args, env = {}, extraConfig) {
      let config = configFile;
      if (extraConfig !== undefined) {
        config = join(dir, `clusterctl-${++extraConfigs}.yaml`);
        writeFileSync(config, `${readFileSync(configFile, 'utf8')}${extraConfig}`);
      }
      const { stdout, stderr } = await run(
        clusterctlBinary,
        // `generate` reads the repository only: it takes no --kubeconfig.
        [...args, '--config', config, ...(args[0] === 'generate' ? [] : ['--kubeconfig', kubeconfig])],
        { env: { XDG_CONFIG_HOME: join(dir, 'xdg'), CLUSTERCTL_DISABLE_VERSIONCHECK: 'true', ...env } },
      );
      return stdout + stderr;
    },
    async release(version, image) {
      const out = join(repo, PROVIDER_LABEL, version);
      await run(
        process.execPath,
        [join(ROOT, 'scripts/release.ts'), '--version', version, '--out', out, ...(image ? ['--image', image] : [])],
        { env: { KUBECTL: o.kubectlBinary } },
      );
      return join(out, 'runtime-extension-components.yaml');
    },
  };
}

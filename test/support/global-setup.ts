import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { bundleWorkflowCode } from '@temporalio/worker';
import { startDevServer, type DevServer } from '../../src/local/temporal-dev-server.ts';
import { startProductionTemporal, type ProductionTemporal } from '../../src/local/temporal-production.ts';
import { startAlerting, type Alerting } from './alerting.ts';
import { startCapiTier, type CapiTier } from './capi-tier.ts';
import { reapOrphanedNodes } from '../../support/nodes/reap.ts';
import { writeTestPki } from './pki.ts';
import { temporalTiers } from './services.ts';

declare global {
  var __capiTestServices:
    | {
        temporal?: DevServer;
        production?: ProductionTemporal;
        dir: string;
        testbed?: string;
        capiTestbed?: string;
        productionTestbed?: string;
        capi?: CapiTier;
        alerting?: Alerting;
      }
    | undefined;
}

export default async function globalSetup(): Promise<void> {
  const selected = selectedProjects(process.argv) ?? [
    'unit',
    'workflow',
    'integration',
    'e2e',
    'capi',
    'production',
    'nodes',
  ];
  const dir = mkdtempSync(join(tmpdir(), 'capi-uo-test-'));
  globalThis.__capiTestServices = { dir };
  // Every temp dir a test or the tools it runs makes (tmpdir(), mktemp, Go's os.TempDir) lands
  // under this run's directory, which the teardown removes: a run leaves nothing in /tmp, also
  // where a test's own cleanup did not run (a failure, a timeout, a force-exited worker).
  const scratch = join(dir, 'tmp');
  mkdirSync(scratch);
  process.env.TMPDIR = scratch;
  process.env.TEST_PKI_FILE = join(dir, 'pki.json');
  writeTestPki(process.env.TEST_PKI_FILE);
  // Nodes a killed run left (its teardown never ran) hold cgroups, mounts and namespaces.
  if (selected.includes('nodes')) await reapOrphanedNodes();
  const needsTemporal = selected.some((p) => temporalTiers.includes(p));
  const needsCapi = selected.includes('capi');
  const needsProduction = selected.includes('production');
  if (!needsTemporal && !needsCapi && !needsProduction) return;

  const executable = process.env.TEMPORAL_CLI ?? 'temporal';
  const started = await Promise.allSettled([
    needsTemporal
      ? startDevServer({ executable, dbFilename: join(dir, 'temporal.db'), logFile: join(dir, 'temporal.log') })
      : Promise.resolve(undefined),
    // Bundled once per run, not once per test file: webpack takes seconds.
    needsTemporal || needsProduction
      ? bundleWorkflowCode({
          workflowsPath: new URL('../../src/workflows/index.ts', import.meta.url).pathname,
          logger: quietLogger,
        })
      : Promise.resolve(undefined),
    // The real-node tier keeps its Clusters and Machines in the same management test bed.
    selected.includes('integration') || selected.includes('nodes')
      ? startTestbed(join(dir, 'testbed')).then((testbedJson) => {
          globalThis.__capiTestServices!.testbed = join(dir, 'testbed');
          process.env.TESTBED_STATE = testbedJson;
        })
      : Promise.resolve(undefined),
    // Real Prometheus and Alertmanager for the alert gate (test/integration/alert-gate.test.ts).
    needsAlerting(selected, process.argv)
      ? startAlerting(join(dir, 'alerting')).then((alerting) => {
          globalThis.__capiTestServices!.alerting = alerting;
          process.env.TEST_PROMETHEUS_URL = alerting.prometheusUrl;
          process.env.TEST_ALERTMANAGER_URL = alerting.alertmanagerUrl;
          process.env.TEST_ALERT_TARGETS_DIR = alerting.targetsDir;
        })
      : Promise.resolve(undefined),
    // A test bed of its own: CAPI's controllers and webhooks would act on the
    // objects the integration tier creates on its management cluster.
    needsCapi
      ? startTestbed(join(dir, 'capi-testbed')).then(async (testbedJson) => {
          globalThis.__capiTestServices!.capiTestbed = join(dir, 'capi-testbed');
          const capi = await startCapiTier(join(dir, 'capi-tier'), testbedJson);
          globalThis.__capiTestServices!.capi = capi;
          Object.assign(process.env, capi.env);
        })
      : Promise.resolve(undefined),
    // The production tier: a test bed of its own (its health checks read every node and PDB of
    // the workload cluster, which the integration tier's tests make NotReady and block on
    // purpose), and the production-shaped Temporal (its services on PostgreSQL).
    needsProduction
      ? startTestbed(join(dir, 'production-testbed')).then((testbedJson) => {
          globalThis.__capiTestServices!.productionTestbed = join(dir, 'production-testbed');
          process.env.PRODUCTION_TESTBED_STATE = testbedJson;
        })
      : Promise.resolve(undefined),
    needsProduction
      ? startProductionTemporal({ stateDir: join(dir, 'temporal-production') }).then((production) => {
          globalThis.__capiTestServices!.production = production;
          process.env.PRODUCTION_TEMPORAL_ADDRESS = production.address;
          process.env.PRODUCTION_TEMPORAL_NAMESPACE = production.namespace;
          process.env.PRODUCTION_TEMPORAL_STATE = production.stateDir;
        })
      : Promise.resolve(undefined),
  ]);
  const [temporalResult, bundleResult] = started;
  if (temporalResult.status === 'fulfilled' && temporalResult.value)
    globalThis.__capiTestServices.temporal = temporalResult.value;
  const failed = started.find((r) => r.status === 'rejected');
  if (failed) {
    // jest runs no global teardown after a failed setup: stop what did start.
    await (await import('./global-teardown.ts')).default();
    throw failed.reason;
  }
  process.env.TEST_SERVICES_DIR = dir;
  if (bundleResult.status === 'fulfilled' && bundleResult.value) {
    const bundlePath = join(dir, 'workflow-bundle.js');
    writeFileSync(bundlePath, bundleResult.value.code);
    process.env.TEST_WORKFLOW_BUNDLE = bundlePath;
  }
  const temporal = temporalResult.status === 'fulfilled' ? temporalResult.value : undefined;
  if (!temporal) return;
  process.env.TEMPORAL_ADDRESS = temporal.address;
  process.env.TEMPORAL_NAMESPACE = temporal.namespace;
}

const TESTBED_SCRIPT = new URL('../../scripts/testbed.sh', import.meta.url).pathname;
const TESTBED_BINARIES = [
  'KWOK_KUBE_APISERVER_BINARY',
  'KWOK_KUBE_CONTROLLER_MANAGER_BINARY',
  'KWOK_KUBE_SCHEDULER_BINARY',
  'KWOK_CONTROLLER_BINARY',
  'KWOK_ETCD_BINARY',
];

/** `scripts/testbed.sh up <state>` (management + KWOK workload cluster); resolves to testbed.json's path. */
async function startTestbed(state: string): Promise<string> {
  const missing = TESTBED_BINARIES.filter((name) => !process.env[name]);
  if (missing.length > 0) {
    throw new Error(
      `the integration, nodes, capi and production tiers need the Kubernetes test bed, but ${missing.join(', ')} ${missing.length === 1 ? 'is' : 'are'} ` +
        'not set: run them with `make test`, `make test-integration`, `make test-capi` or `make test-production`, or `source scripts/env.sh --testbed --capi --temporal-production` first',
    );
  }
  const env = { ...process.env, TESTBED_SUFFIX: `${process.pid}-${randomBytes(3).toString('hex')}` };
  await new Promise<void>((resolve, reject) => {
    execFile('bash', [TESTBED_SCRIPT, 'up', state], { env, maxBuffer: 16 << 20 }, (err, _stdout, stderr) => {
      if (err) reject(new Error(`scripts/testbed.sh up ${state} failed (${err.message.split('\n')[0]}):\n${stderr}`));
      else resolve();
    });
  });
  return join(state, 'testbed.json');
}

/** The integration tier runs, and (when files are named) one of them is about alerts. */
function needsAlerting(selected: string[], argv: string[]): boolean {
  if (!selected.includes('integration')) return false;
  const at = argv.indexOf('--runTestsByPath');
  if (at < 0) return true;
  return argv.slice(at + 1).some((arg) => !arg.startsWith('-') && /alert/.test(arg));
}

/** `--selectProjects a b` as jest was called (the setup hook is not told). */
function selectedProjects(argv: string[]): string[] | undefined {
  const at = argv.indexOf('--selectProjects');
  if (at < 0) return undefined;
  const names: string[] = [];
  for (const arg of argv.slice(at + 1)) {
    if (arg.startsWith('-')) break;
    names.push(arg);
  }
  return names;
}

const noop = (): void => {};
const quietLogger = { trace: noop, debug: noop, info: noop, warn: console.warn, error: console.error, log: noop };

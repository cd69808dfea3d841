import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { bundleWorkflowCode } from '@temporalio/worker';
import { startDevServer, type DevServer } from '../../src/local/temporal-dev-server.ts';
import { writeTestPki } from './pki.ts';
import { temporalTiers } from './services.ts';

declare global {
  var __capiTestServices: { temporal?: DevServer; dir: string } | undefined;
}

export default async function globalSetup(): Promise<void> {
  const selected = selectedProjects(process.argv) ?? ['unit', 'workflow', 'integration', 'e2e'];
  const dir = mkdtempSync(join(tmpdir(), 'capi-uo-test-'));
  globalThis.__capiTestServices = { dir };
  process.env.TEST_PKI_FILE = join(dir, 'pki.json');
  writeTestPki(process.env.TEST_PKI_FILE);
  if (!selected.some((p) => temporalTiers.includes(p))) return;

  const executable = process.env.TEMPORAL_CLI ?? 'temporal';
  const [temporal, bundle] = await Promise.all([
    startDevServer({ executable, dbFilename: join(dir, 'temporal.db'), logFile: join(dir, 'temporal.log') }),
    // Bundled once per run, not once per test file: webpack takes seconds.
    bundleWorkflowCode({
      workflowsPath: new URL('../../src/workflows/index.ts', import.meta.url).pathname,
      logger: quietLogger,
    }),
  ]);
  globalThis.__capiTestServices.temporal = temporal;
  const bundlePath = join(dir, 'workflow-bundle.js');
  writeFileSync(bundlePath, bundle.code);
  process.env.TEMPORAL_ADDRESS = temporal.address;
  process.env.TEMPORAL_NAMESPACE = temporal.namespace;
  process.env.TEST_WORKFLOW_BUNDLE = bundlePath;
  process.env.TEST_SERVICES_DIR = dir;
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

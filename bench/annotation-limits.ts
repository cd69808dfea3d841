// Discovery latency while other callers send Clusters whose annotations are at Kubernetes' 256 KiB
// limit (not a test): one cluster's policy must not hold every other caller.
//
//   node bench/annotation-limits.ts [--discoveries 1000] [--hostile 2]
//
// One process: the real HTTPS hook server (TLS, fastify, the upgrade handlers with a Temporal
// client that is never reached: the policy is refused first), `--hostile` loops sending
// BeforeClusterUpgrade with a 256 KiB maintenance-freezes ("a/a/…") and GenerateUpgradePlan with
// a 256 KiB kubernetes-versions ("v1<spaces>x"), and one loop timing discovery calls. Client and
// server share the event loop, so a parse that held it would show in every discovery.
import { parseArgs } from 'node:util';
import { Client, Connection } from '@temporalio/client';
import { defaultHandlerName, HOOKS_API_VERSION } from '../src/api/hooks/contract.ts';
import { createClusterUpgradeHandlers } from '../src/api/handlers/lifecycle/cluster-upgrades.ts';
import { hookPath } from '../src/api/hooks/hook-route.ts';
import { requestChecksOff } from '../src/api/handlers/request-checks.ts';
import { DISCOVERY_PATH } from '../src/api/hooks/discovery.ts';
import { callHook } from '../support/capi-client.ts';
import { cluster } from '../support/capi-fixtures.ts';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startBenchHookServer, writeServingCertificate } from '../support/hook-server.ts';

const { values } = parseArgs({ options: { discoveries: { type: 'string' }, hostile: { type: 'string' } } });
const discoveries = Number(values.discoveries ?? 1000);
const hostile = Number(values.hostile ?? 2);
const P = 'upgrades.capi-orchestrator.io/';
const SIZE = 256 * 1024;

const certDir = mkdtempSync(join(tmpdir(), 'capi-uo-bench-'));
const caPem = writeServingCertificate(certDir);
const client = new Client({ connection: Connection.lazy({ address: '127.0.0.1:1' }) });
const lifecycle = createClusterUpgradeHandlers({ client, taskQueue: 'bench', checks: requestChecksOff });
const t = await startBenchHookServer(certDir, 'silent', lifecycle);
const opts = { ca: caPem, timeout: '10s' };

function withAnnotation(name: string, value: string) {
  const c = cluster('big', 'tenant');
  c.metadata.annotations = { ...c.metadata.annotations, [`${P}${name}`]: value };
  return c;
}
const upgrade = {
  apiVersion: HOOKS_API_VERSION,
  kind: 'BeforeClusterUpgradeRequest',
  cluster: withAnnotation('maintenance-freezes', 'a/'.repeat(SIZE / 2)),
  fromKubernetesVersion: 'v1.32.0',
  toKubernetesVersion: 'v1.33.0',
  controlPlaneUpgrades: [{ version: 'v1.33.0' }],
  workersUpgrades: [{ version: 'v1.33.0' }],
};
const plan = {
  apiVersion: HOOKS_API_VERSION,
  kind: 'GenerateUpgradePlanRequest',
  cluster: withAnnotation('kubernetes-versions', `v1${' '.repeat(SIZE - 3)}x`),
  fromControlPlaneKubernetesVersion: 'v1.32.0',
  toKubernetesVersion: 'v1.33.0',
};

let stop = false;
let hostileCalls = 0;
const answers = new Set<string>();
const loops = Array.from({ length: hostile }, async () => {
  while (!stop) {
    for (const [hook, body] of [
      ['BeforeClusterUpgrade', upgrade],
      ['GenerateUpgradePlan', plan],
    ] as const) {
      const res = await callHook<{ status: string; message: string }>(
        t.url,
        hookPath(hook, defaultHandlerName(hook)),
        body,
        opts,
      );
      answers.add(`${res.statusCode} ${res.body.status}: ${res.body.message}`);
      hostileCalls++;
    }
  }
});
const latencies: number[] = [];
for (let i = 0; i < discoveries; i++) {
  const start = performance.now();
  const res = await callHook(t.url, DISCOVERY_PATH, { apiVersion: HOOKS_API_VERSION, kind: 'DiscoveryRequest' }, opts);
  if (res.statusCode !== 200) throw new Error(`discovery answered ${res.statusCode}`);
  latencies.push(performance.now() - start);
}
stop = true;
await Promise.all(loops);
await t.close();
rmSync(certDir, { recursive: true, force: true });
latencies.sort((a, b) => a - b);
const at = (q: number) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))]!.toFixed(1);
console.log(`discovery: ${discoveries} calls, p50 ${at(0.5)} ms, p99 ${at(0.99)} ms, max ${at(1)} ms`);
console.log(`alongside ${hostileCalls} hook calls with a 256 KiB annotation (${hostile} loops), answered:`);
for (const a of answers) console.log(`  ${a}`);

// Starts the real hook server (TLS, listen, routes) on a free loopback port
// with certificates made for the test, as cert-manager would mount them.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseConfig } from '../../src/config/index.ts';
import type { ServerConfig } from '../../src/config/server.ts';
import type { PemPair } from '../../src/local/certs.ts';
import { HookRegistry } from '../../src/api/hooks/registry.ts';
import { startHookServer, type HookServer } from '../../src/api/http/server.ts';
import type { LifecycleHandlers } from '../../src/api/handlers/lifecycle/routes.ts';
import type { InPlaceHandlers } from '../../src/api/handlers/in-place/routes.ts';
import { noInPlaceHandlers, nonBlockingLifecycleHandlers } from '../../support/stub-handlers.ts';
import { createCanUpdateHandlers } from '../../src/api/handlers/in-place/can-update.ts';
import type { NodeAgentCheck } from '../../src/platform/kube/node-agents.ts';
import type { NodeUpgraderCheck } from '../../src/platform/kube/node-upgraders.ts';
import type { UpgradePlanHandlers } from '../../src/api/handlers/upgrade-plan/routes.ts';
import { upgradePlanHandlers } from '../../src/api/handlers/upgrade-plan/generate-upgrade-plan.ts';
import { testPki } from './pki.ts';

export interface TestHookServer {
  server: HookServer;
  url: string;
  dir: string;
  ca: PemPair;
  /** Signs client certificates when mutual TLS is on. */
  clientCa?: PemPair;
  client?: PemPair;
  writeServingCertificate(pair: PemPair): void;
  /** The server's log lines, parsed (only when `captureLog` was asked for). */
  logLines(): Record<string, unknown>[];
  close(): Promise<void>;
}

export interface TestHookServerOptions {
  env?: Record<string, string>;
  server?: Partial<ServerConfig>;
  mutualTls?: boolean;
  /** Keep the server's log lines (at info level and above) for assertions. */
  captureLog?: boolean;
  lifecycle?: Partial<LifecycleHandlers>;
  upgradePlan?: Partial<UpgradePlanHandlers>;
  inPlace?: Partial<InPlaceHandlers>;
  /** The delegate executor's agent check; default: an agent serves every node (the integration tier tests the real one). */
  nodeAgents?: NodeAgentCheck;
  /** The management executor's upgrader check; default: none (not in place). */
  nodeUpgraders?: NodeUpgraderCheck;
}

const everyNodeHasAnAgent: NodeAgentCheck = { missing: async () => undefined };

export async function startTestHookServer(options: TestHookServerOptions = {}): Promise<TestHookServer> {
  const dir = mkdtempSync(join(tmpdir(), 'capi-uo-hooks-'));
  const pki = testPki();
  const ca = pki.ca;
  const writeServingCertificate = (pair: PemPair) => {
    // Key first, then cert: the reloader must tolerate the moment in between.
    writeFileSync(join(dir, 'tls.key'), pair.keyPem);
    writeFileSync(join(dir, 'tls.crt'), pair.certPem);
  };
  writeServingCertificate(pki.serving);
  let clientCa: PemPair | undefined;
  let client: PemPair | undefined;
  if (options.mutualTls) {
    clientCa = pki.clientCa;
    client = pki.client;
    writeFileSync(join(dir, 'client-ca.crt'), clientCa.certPem);
  }
  const config = parseConfig({
    HOOK_SERVER_HOST: '127.0.0.1',
    HOOK_SERVER_PORT: '0',
    TLS_CERT_DIR: dir,
    LOG_LEVEL: 'silent',
    ...(options.mutualTls ? { TLS_CLIENT_CA_FILE: join(dir, 'client-ca.crt') } : {}),
    ...options.env,
  });
  const lines: string[] = [];
  const server = await startHookServer({
    server: { ...config.server, ...options.server },
    logLevel: options.captureLog ? 'info' : config.logLevel,
    ...(options.captureLog ? { logStream: { write: (line: string) => void lines.push(line) } } : {}),
    app: {
      registry: new HookRegistry(config.handlers),
      lifecycle: { ...nonBlockingLifecycleHandlers, ...options.lifecycle },
      upgradePlan: { ...upgradePlanHandlers, ...options.upgradePlan },
      inPlace: {
        ...noInPlaceHandlers,
        ...createCanUpdateHandlers(options.nodeAgents ?? everyNodeHasAnAgent, options.nodeUpgraders),
        ...options.inPlace,
      },
    },
  });
  return {
    server,
    url: server.url,
    dir,
    ca,
    ...(clientCa ? { clientCa } : {}),
    ...(client ? { client } : {}),
    writeServingCertificate,
    logLines: () => lines.map((l) => JSON.parse(l) as Record<string, unknown>),
    async close() {
      await server.close();
      // Handlers backed by the cluster upgrade workflow keep a view refreshed on a timer: stop it.
      (options.lifecycle as { views?: { close(): void } } | undefined)?.views?.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

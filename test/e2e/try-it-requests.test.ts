// docs/try-it.md's requests by hand, sent as the page has them to the extension
// as `make dev MANAGEMENT=none` runs it (both roles, request checks off, no
// management cluster), and its `temporal` commands run as typed: each answer is
// what the page says it is.
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { HOOKS_PATH_PREFIX } from '../../src/api/hooks/contract.ts';
import { callHook } from '../../support/capi-client.ts';
import { startExtensionProcess, type ExtensionProcess } from '../support/extension-process.ts';
import { testPki } from '../support/pki.ts';
import { requireEnv } from '../support/services.ts';
import { waitFor } from '../support/wait.ts';

const run = promisify(execFile);
const PAGE = readFileSync(new URL('../../docs/try-it.md', import.meta.url), 'utf8');

interface PageRequest {
  path: string;
  body: Record<string, unknown>;
}

/** Every `$CURL -X POST $HOOKS/<path> -d @- <<'EOF' … EOF` of the page, in order. */
function pageRequests(): PageRequest[] {
  const found: PageRequest[] = [];
  for (const m of PAGE.matchAll(/\$CURL -X POST \$HOOKS\/(\S+) -d @- <<'EOF'\n([\s\S]*?)\nEOF\n/g))
    found.push({ path: m[1]!, body: JSON.parse(m[2]!) as Record<string, unknown> });
  return found;
}

/** The page's `temporal workflow signal …` commands (continued lines joined), as argument lists. */
function pageSignals(): string[][] {
  const lines = PAGE.replace(/\\\n\s*/g, '').split('\n');
  return lines
    .filter((l) => l.startsWith('temporal workflow signal'))
    .map((l) => [...l.matchAll(/'([^']*)'|(\S+)/g)].map((m) => m[1] ?? m[2]!).slice(1));
}

describe('docs/try-it.md: requests by hand without a management cluster', () => {
  let proc: ExtensionProcess;
  const requests = pageRequests();
  const send = async (r: PageRequest) =>
    await callHook<{ status: string; message?: string; retryAfterSeconds?: number; [k: string]: unknown }>(
      proc.hookUrl,
      `${HOOKS_PATH_PREFIX}/${r.path}`,
      r.body,
      { ca: testPki().ca.certPem },
    );

  beforeAll(async () => {
    proc = await startExtensionProcess({
      ROLE: 'all',
      TEMPORAL_ADDRESS: requireEnv('TEMPORAL_ADDRESS'),
      TEMPORAL_NAMESPACE: requireEnv('TEMPORAL_NAMESPACE'),
      TEMPORAL_TASK_QUEUE: `try-it-${randomUUID()}`,
    });
    await proc.ready();
  }, 120_000);
  afterAll(() => proc?.kill());

  it('has the requests the page describes: discovery, a plan and an upgrade', () => {
    expect(requests.map((r) => r.path)).toEqual([
      'discovery',
      'generateupgradeplan/generate-upgrade-plan',
      'beforeclusterupgrade/before-cluster-upgrade',
    ]);
    expect(pageSignals().map((args) => args[args.indexOf('--name') + 1])).toEqual(['abort', 'resume']);
  });

  it('answers discovery with the handlers, and plans one control-plane step per minor', async () => {
    const discovery = await send(requests[0]!);
    expect(discovery.statusCode).toBe(200);
    expect(JSON.stringify(discovery.body.handlers)).toContain('before-cluster-upgrade');
    const plan = await send(requests[1]!);
    expect(plan.statusCode).toBe(200);
    expect(plan.body.status).toBe('Success');
    const steps = (plan.body.controlPlaneUpgrades as Array<{ version: string }>).map((s) => s.version);
    expect(steps).toEqual([expect.stringMatching(/^v1\.34\.\d+$/), 'v1.35.0']);
  });

  it('holds the upgrade until its upgrade-at time, stops it on the abort signal as typed, and resumes', async () => {
    const upgrade = requests[2]!;
    const first = await send(upgrade);
    expect(first.statusCode).toBe(200);
    expect(first.body).toMatchObject({ status: 'Success' });
    expect(first.body.retryAfterSeconds).toBeGreaterThan(0);
    const waiting = await waitFor(
      async () => (await send(upgrade)).body,
      (b) => String(b.message).includes('2030-01-05T02:00:00'),
      30_000,
    );
    expect(waiting.message).toContain('2030-01-05T02:00:00');
    expect(waiting).toMatchObject({ status: 'Success', retryAfterSeconds: expect.any(Number) });
    expect(waiting.retryAfterSeconds).toBeGreaterThan(0);
    const temporal = process.env.TEMPORAL_CLI ?? 'temporal';
    const at = ['--address', requireEnv('TEMPORAL_ADDRESS'), '--namespace', requireEnv('TEMPORAL_NAMESPACE')];
    const [abort, resume] = pageSignals();
    await run(temporal, [...abort!, ...at]);
    const aborted = await waitFor(
      async () => (await send(upgrade)).body,
      (b) => b.status === 'Failure',
      30_000,
    );
    expect(aborted).toMatchObject({ status: 'Failure', message: expect.stringContaining('trying the abort') });
    await run(temporal, [...resume!, ...at]);
    const resumed = await waitFor(
      async () => (await send(upgrade)).body,
      (b) => b.status === 'Success',
      30_000,
    );
    expect(resumed.message).toContain('2030-01-05T02:00:00');
  });
});

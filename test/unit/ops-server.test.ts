import { afterEach, describe, expect, it } from '@jest/globals';
import { registry } from '../../src/ops/metrics.ts';
import { startOpsServer, type HealthCheck, type OpsServer } from '../../src/ops/ops-server.ts';
import { startTemporalProbe, type TemporalProbe } from '../../src/ops/temporal-probe.ts';
import { waitFor } from '../support/wait.ts';

describe('the ops server', () => {
  let server: OpsServer | undefined;
  let probe: TemporalProbe | undefined;
  afterEach(async () => {
    probe?.stop();
    await server?.close();
  });
  const start = async (live: HealthCheck[], ready: HealthCheck[]) => {
    server = await startOpsServer({ host: '127.0.0.1', port: 0, live, ready });
    return server.url;
  };

  it('stays ready while Temporal is unreachable, saying so in the body and the metric', async () => {
    probe = startTemporalProbe(
      () => Promise.reject(Object.assign(new Error('connect ECONNREFUSED 10.0.0.1:7233'), { code: 14 })),
      50,
    );
    const url = await start(
      [],
      [
        { name: 'hookServer', check: () => undefined },
        { name: 'temporal', informational: true, check: () => probe?.problem() },
      ],
    );
    const res = await fetch(`${url}/readyz`);
    expect(res.status).toBe(200);
    // Stable words: no address, no error text that changes from call to call.
    expect(await res.json()).toEqual({
      status: 'ok',
      checks: { hookServer: 'ok', temporal: 'unreachable (gRPC code 14)' },
    });
    const metrics = await (await fetch(`${url}/metrics`)).text();
    expect(metrics).toMatch(/^capi_upgrade_temporal_reachable 0$/m);
    expect(res.headers.get('content-type')).toBe('application/json');
  });

  it('reports reachable once a probe answers', async () => {
    let up = false;
    probe = startTemporalProbe(() => (up ? Promise.resolve() : Promise.reject(new Error('down'))), 20);
    expect(probe.problem()).toBeDefined();
    up = true;
    await waitFor(
      async () => probe?.problem(),
      (p) => p === undefined,
      2_000,
    );
    expect(await registry.getSingleMetricAsString('capi_upgrade_temporal_reachable')).toMatch(/ 1$/m);
  });

  it('fails /readyz (503) on a failing check and /livez on a failing liveness check, naming them', async () => {
    const url = await start(
      [{ name: 'worker', check: () => 'worker FAILED' }],
      [{ name: 'worker', check: () => 'starting' }],
    );
    const ready = await fetch(`${url}/readyz`);
    expect(ready.status).toBe(503);
    expect(await ready.json()).toEqual({ status: 'failing', checks: { worker: 'starting' } });
    const live = await fetch(`${url}/livez`);
    expect(live.status).toBe(503);
    expect(await live.json()).toEqual({ status: 'failing', checks: { worker: 'worker FAILED' } });
    expect((await fetch(`${url}/livez`, { method: 'POST' })).status).toBe(405);
  });

  it('counts a check that throws as failing rather than crashing the probe', async () => {
    const url = await start(
      [],
      [
        {
          name: 'odd',
          check: () => {
            throw new Error('boom');
          },
        },
      ],
    );
    const ready = await fetch(`${url}/readyz`);
    expect(ready.status).toBe(503);
    expect(await ready.json()).toEqual({ status: 'failing', checks: { odd: 'check failed: boom' } });
  });
});

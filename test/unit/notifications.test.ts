import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from '@jest/globals';
import { ConfigError, parseConfig } from '../../src/config/index.ts';
import { createNotifier, type CloudEvent } from '../../src/activities/notifications.ts';
import type { ClusterEventInput } from '../../src/activities/upgrade-types.ts';
import { registry } from '../../src/ops/metrics.ts';

interface Received {
  contentType: string | undefined;
  body: CloudEvent;
}

describe('phase-change notifications (CloudEvents to a webhook)', () => {
  let server: Server | undefined;
  afterEach(async () => {
    await new Promise<void>((r) => (server ? server.close(() => r()) : r()));
    server = undefined;
  });
  /** A webhook answering the statuses given, in order (then 200). */
  const webhook = async (statuses: number[]) => {
    const received: Received[] = [];
    server = createServer((req: IncomingMessage, res) => {
      let data = '';
      req.on('data', (c: Buffer) => (data += c.toString()));
      req.on('end', () => {
        received.push({ contentType: req.headers['content-type'], body: JSON.parse(data) as CloudEvent });
        res.writeHead(statuses.shift() ?? 200).end();
      });
    });
    await new Promise<void>((r) => server!.listen(0, '127.0.0.1', r));
    return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, received };
  };
  const event = (reason: ClusterEventInput['reason']): ClusterEventInput => ({
    cluster: { namespace: 'fleet-a', name: 'prod-1' },
    reason,
    type: reason === 'UpgradeFailed' ? 'Warning' : 'Normal',
    message: 'upgrade to v1.33.0 failed at AfterControlPlaneUpgrade v1.32.13: health check timed out',
    key: 'cluster-upgrade/fleet-a/prod-1/uid/run/4',
  });

  it('posts a phase change as a structured CloudEvent whose id is the event key', async () => {
    const hook = await webhook([]);
    expect(await createNotifier({ url: hook.url })(event('UpgradeFailed'))).toBe(true);
    expect(hook.received).toHaveLength(1);
    expect(hook.received[0]?.contentType).toBe('application/cloudevents+json');
    expect(hook.received[0]?.body).toEqual({
      specversion: '1.0',
      id: 'cluster-upgrade/fleet-a/prod-1/uid/run/4',
      source: 'capi-upgrade-orchestrator',
      type: 'io.capi-orchestrator.upgrade.failed',
      subject: 'fleet-a/prod-1',
      time: expect.any(String) as unknown,
      datacontenttype: 'application/json',
      data: {
        cluster: { namespace: 'fleet-a', name: 'prod-1' },
        reason: 'UpgradeFailed',
        message: event('UpgradeFailed').message,
      },
    });
  });

  it('sends nothing for a step (only phase changes are notified)', async () => {
    const hook = await webhook([]);
    expect(await createNotifier({ url: hook.url })(event('UpgradeStepOpened'))).toBe(true);
    expect(hook.received).toHaveLength(0);
  });

  it('retries a webhook that is down (5xx, 429), and gives up on one that refuses (4xx)', async () => {
    const flaky = await webhook([503, 429]);
    expect(await createNotifier({ url: flaky.url, backoffMs: 10 })(event('UpgradeStarted'))).toBe(true);
    expect(flaky.received.map((r) => r.body.id)).toEqual(Array(3).fill(event('UpgradeStarted').key));
    await new Promise<void>((r) => server!.close(() => r()));

    const refusing = await webhook([403]);
    const before = await registry.getSingleMetricAsString('capi_upgrade_notifications_total');
    expect(await createNotifier({ url: refusing.url, backoffMs: 10 })(event('UpgradeAborted'))).toBe(false);
    expect(refusing.received).toHaveLength(1);
    const after = await registry.getSingleMetricAsString('capi_upgrade_notifications_total');
    const failed = (text: string) => Number(/result="failed"} (\d+)/.exec(text)?.[1] ?? 0);
    expect(failed(after)).toBe(failed(before) + 1);
  });

  it('gives up after its tries when nothing listens, without throwing', async () => {
    const notify = createNotifier({ url: 'http://127.0.0.1:9/hook', attempts: 2, backoffMs: 10, timeoutMs: 500 });
    expect(await notify(event('UpgradeCompleted'))).toBe(false);
  });

  it('refuses a webhook setting that is not an http(s) URL, without echoing it (it may carry a token)', () => {
    expect(parseConfig({ NOTIFICATION_WEBHOOK_URL: 'https://hooks.example/T0/secret' }).notificationWebhookUrl).toBe(
      'https://hooks.example/T0/secret',
    );
    let error: unknown;
    try {
      parseConfig({ NOTIFICATION_WEBHOOK_URL: 'ftp://secret-token@host' });
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).problems).toEqual(['NOTIFICATION_WEBHOOK_URL: expected an http:// or https:// URL']);
  });
});

// The test setup's Prometheus + Alertmanager when the first start fails (a port taken
// between its choice and its bind by a stack starting beside them): started once more on
// new ports, with the failed server's own last log lines in the warning.
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it, jest } from '@jest/globals';
import { startAlerting, type Alerting } from '../support/alerting.ts';

const BIND_ERROR = 'err="listen tcp 127.0.0.1:9090: bind: address already in use"';

describe('starting the alert gate test services', () => {
  const dir = mkdtempSync(join(tmpdir(), 'capi-uo-alerting-start-'));
  let alerting: Alerting | undefined;
  const realPrometheus = process.env.PROMETHEUS_BIN;
  afterAll(async () => {
    await alerting?.stop();
    if (realPrometheus === undefined) delete process.env.PROMETHEUS_BIN;
    else process.env.PROMETHEUS_BIN = realPrometheus;
    rmSync(dir, { recursive: true, force: true });
  });

  it('starts again on new ports when Prometheus exits at its first start, and then serves', async () => {
    const counter = join(dir, 'runs');
    writeFileSync(counter, '');
    const wrapper = join(dir, 'prometheus.sh');
    // Its first run dies as a lost bind does; `--version` (asked after the start) always answers.
    writeFileSync(
      wrapper,
      `#!/usr/bin/env bash
if [ "$1" != --version ]; then
  echo run >> ${JSON.stringify(counter)}
  if [ "$(wc -l < ${JSON.stringify(counter)})" -le 1 ]; then echo ${JSON.stringify(BIND_ERROR)} >&2; exit 1; fi
fi
exec ${JSON.stringify(realPrometheus ?? 'prometheus')} "$@"
`,
    );
    chmodSync(wrapper, 0o755);
    process.env.PROMETHEUS_BIN = wrapper;
    const warn = jest.spyOn(console, 'warn').mockImplementation(() => {});
    let warnings: string[];
    try {
      alerting = await startAlerting(join(dir, 'alerting'));
    } finally {
      warnings = warn.mock.calls.map((args) => String(args[0]));
      warn.mockRestore();
    }
    expect(readFileSync(counter, 'utf8').split('\n').filter(Boolean)).toHaveLength(2);
    expect(warnings).toHaveLength(1);
    const warning = warnings[0];
    expect(warning).toContain('the process exited with 1');
    expect(warning).toContain(BIND_ERROR);
    expect(warning).toContain('starting Prometheus and Alertmanager again on new ports');
    const ready = await fetch(`${alerting.prometheusUrl}/-/ready`);
    expect(ready.status).toBe(200);
    expect((await fetch(`${alerting.alertmanagerUrl}/-/ready`)).status).toBe(200);
  });
});

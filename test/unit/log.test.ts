import { Writable } from 'node:stream';
import { describe, expect, it } from '@jest/globals';
import { ApplicationFailure } from '@temporalio/common';
import { pino } from 'pino';
import { subjectOfWorkflowId, temporalSdkLogger } from '../../src/log.ts';

/** The SDK's logger at info, writing into `lines`. */
function sdkAtInfo() {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.push(chunk.toString());
      done();
    },
  });
  return { lines, sdk: temporalSdkLogger(pino({ level: 'info' }, sink), 'info') };
}

describe('logs', () => {
  it('names the cluster or machine a workflow is about, from its id', () => {
    expect(subjectOfWorkflowId('cluster-upgrade/fleet-a/prod-1/0b7c')).toEqual({ cluster: 'fleet-a/prod-1' });
    expect(subjectOfWorkflowId('machine-update-slots/fleet-a/prod-1')).toEqual({ cluster: 'fleet-a/prod-1' });
    expect(subjectOfWorkflowId('machine-update/fleet-a/prod-1-md-0-x7/abc')).toEqual({
      machine: 'fleet-a/prod-1-md-0-x7',
    });
    expect(subjectOfWorkflowId('heartbeat-probe-1')).toBeUndefined();
    expect(subjectOfWorkflowId(undefined)).toBeUndefined();
  });

  it('writes the Temporal SDK entries as JSON lines with workflowId, runId and the subject, at the configured level', () => {
    const { lines, sdk } = sdkAtInfo();
    sdk.info('Activity completed', { workflowId: 'cluster-upgrade/ns/c1/uid', runId: 'r-1', activityType: 'drain' });
    sdk.debug('not shown at info', {});
    expect(lines).toHaveLength(1);
    expect(JSON.parse(lines[0]!)).toMatchObject({
      level: 30,
      msg: 'Activity completed',
      source: 'temporal-sdk',
      workflowId: 'cluster-upgrade/ns/c1/uid',
      runId: 'r-1',
      activityType: 'drain',
      cluster: 'ns/c1',
    });
  });

  it("writes an activity's failure in one line: an application failure's type and message, without its stack", () => {
    const { lines, sdk } = sdkAtInfo();
    const expected = ApplicationFailure.nonRetryable('no management cluster: MANAGEMENT_KUBECONFIG is not set', 'X');
    sdk.warn('Activity failed', { activityType: 'checkClusterHealth', error: expected, durationMs: 1 });
    // A bug keeps its stack (one JSON line still): that is what it is read for.
    sdk.warn('Activity failed', { activityType: 'drain', error: new TypeError('x is undefined') });
    expect(lines).toHaveLength(2);
    expect(lines.every((l) => l.trimEnd().split('\n').length === 1)).toBe(true);
    const [failure, bug] = lines.map((l) => JSON.parse(l) as { error: Record<string, unknown> });
    expect(failure!.error).toEqual({
      type: 'X',
      message: 'no management cluster: MANAGEMENT_KUBECONFIG is not set',
      nonRetryable: true,
    });
    expect(bug!.error).toMatchObject({ type: 'TypeError', message: 'x is undefined' });
    expect(bug!.error.stack).toEqual(expect.stringContaining('TypeError: x is undefined\n    at '));
  });
});

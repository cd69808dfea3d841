import { Writable } from 'node:stream';
import { describe, expect, it } from '@jest/globals';
import { pino } from 'pino';
import { subjectOfWorkflowId, temporalSdkLogger } from '../../src/log.ts';

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
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        lines.push(chunk.toString());
        done();
      },
    });
    const sdk = temporalSdkLogger(pino({ level: 'info' }, sink), 'info');
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
});

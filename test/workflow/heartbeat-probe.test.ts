import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { Client } from '@temporalio/client';
import { createProbeActivities } from '../../src/activities/probe.ts';
import { abortSignal } from '../../src/workflows/messages.ts';
import { probeStateQuery, type ProbeState } from '../../src/workflows/heartbeat-probe.ts';
import { testClient, uniqueTaskQueue, withWorker } from '../support/temporal.ts';

describe('harness: a real worker on the dev server', () => {
  let client: Client;
  let close: () => Promise<void>;
  beforeAll(async () => ({ client, close } = await testClient()));
  afterAll(async () => close());

  it('runs the activity, answers a query and obeys a signal', async () => {
    const taskQueue = uniqueTaskQueue('probe');
    const result = await withWorker({ taskQueue, activities: createProbeActivities() }, async () => {
      const handle = await client.workflow.start('heartbeatProbeWorkflow', {
        taskQueue,
        workflowId: `probe-${taskQueue}`,
        args: [{ name: 'capi', waitSeconds: 60 }],
      });
      // The query is answered by the worker from live workflow state.
      let state: ProbeState = await handle.query(probeStateQuery);
      for (let i = 0; i < 50 && state.greeting === undefined; i++) {
        await new Promise((r) => setTimeout(r, 100));
        state = await handle.query(probeStateQuery);
      }
      expect(state).toEqual({ phase: 'Waiting', greeting: 'hello, capi' });
      await handle.signal(abortSignal, { reason: 'test says stop' });
      return (await handle.result()) as ProbeState;
    });
    expect(result).toEqual({ phase: 'Aborted', greeting: 'hello, capi', abortReason: 'test says stop' });
  });

  it('finishes on its own when no signal comes within the timer', async () => {
    const taskQueue = uniqueTaskQueue('probe');
    const result = await withWorker({ taskQueue, activities: createProbeActivities() }, async () => {
      return (await client.workflow.execute('heartbeatProbeWorkflow', {
        taskQueue,
        workflowId: `probe-${taskQueue}`,
        args: [{ name: 'timer', waitSeconds: 1 }],
      })) as ProbeState;
    });
    expect(result.phase).toBe('Completed');
  });
});

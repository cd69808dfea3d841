// Why a failed node upgrade pod failed, as CAPI reads it when the script printed nothing:
// checked tokens from the pod's status, never the API server's free text.
import { describe, expect, it } from '@jest/globals';
import type { V1Pod } from '@kubernetes/client-node';
import { podFailure, UPGRADE_CONTAINER } from '../../src/activities/executors/job-pods.ts';

const pod = (status: V1Pod['status']): V1Pod => ({ metadata: { name: 'upgrade-x' }, status });

describe('podFailure', () => {
  it("names the kubelet's reason for the pod first", () => {
    expect(
      podFailure(
        pod({
          phase: 'Failed',
          reason: 'UnexpectedAdmissionError',
          message: 'Allocate failed due to no healthy devices present',
        }),
      ),
    ).toBe('the pod failed: UnexpectedAdmissionError');
  });

  it('says how the upgrade container ended, its signal included', () => {
    const ended = (terminated: object) =>
      podFailure(
        pod({ phase: 'Failed', containerStatuses: [{ name: UPGRADE_CONTAINER, state: { terminated } }] as never }),
      );
    expect(ended({ exitCode: 137, reason: 'OOMKilled' })).toBe('its container exited 137 (OOMKilled)');
    expect(ended({ exitCode: 143, reason: 'Error', signal: 15 })).toBe('its container exited 143 (Error, signal 15)');
    expect(ended({ exitCode: 2 })).toBe('its container exited 2');
  });

  it('reads the last state when the container was restarted, and a container that never ran', () => {
    expect(
      podFailure(
        pod({
          phase: 'Failed',
          containerStatuses: [
            { name: UPGRADE_CONTAINER, state: {}, lastState: { terminated: { exitCode: 1, reason: 'Error' } } },
          ] as never,
        }),
      ),
    ).toBe('its container exited 1 (Error)');
    expect(
      podFailure(
        pod({
          phase: 'Failed',
          containerStatuses: [
            { name: UPGRADE_CONTAINER, state: { waiting: { reason: 'CreateContainerError' } } },
          ] as never,
        }),
      ),
    ).toBe('its container never ran: CreateContainerError');
    expect(podFailure(pod({ phase: 'Failed' }))).toBe('its container never started');
  });

  it("quotes no free text from a hostile API server's answer", () => {
    const hostile = 'Evicted; token=abc123 \u001b[2J';
    expect(podFailure(pod({ phase: 'Failed', reason: hostile }))).toBe('its container never started');
    const long = 'A'.repeat(65);
    const ended = podFailure(
      pod({
        phase: 'Failed',
        containerStatuses: [
          { name: UPGRADE_CONTAINER, state: { terminated: { exitCode: 1.5, reason: long } } },
        ] as never,
      }),
    );
    expect(ended).toBe('its container exited ?');
    expect(ended).not.toContain('A');
  });
});

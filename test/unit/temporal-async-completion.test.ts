// What a refused heartbeat of an asynchronously completed activity means to the node upgrade
// watch: cancelled by its workflow, gone (ended otherwise), or nothing it can act on.
import { describe, expect, it } from '@jest/globals';
import { ActivityCancelledError, ActivityNotFoundError } from '@temporalio/client';
import { heartbeatRefusal } from '../../src/platform/temporal/async-completion.ts';

describe('heartbeatRefusal', () => {
  it('tells a cancelled activity from one that is gone, and from any other error', () => {
    expect(heartbeatRefusal(new ActivityCancelledError('cancelled'))).toBe('cancelled');
    expect(heartbeatRefusal(new ActivityNotFoundError('not found'))).toBe('gone');
    expect(heartbeatRefusal(new Error('14 UNAVAILABLE: connection refused'))).toBeUndefined();
    expect(heartbeatRefusal(undefined)).toBeUndefined();
  });
});

import { describe, expect, it } from '@jest/globals';
import { allowedUnavailable } from '../../src/domain/max-unavailable.ts';

describe('allowedUnavailable', () => {
  it.each([
    [1, 3, 1],
    [2, 3, 2],
    ['2', 3, 2],
    ['50%', 4, 2],
    ['25%', 3, 1], // 0.75 rounds down to 0, and an in-place update needs 1
    ['34%', 10, 3],
    [0, 5, 1],
    [undefined, 5, 1],
    ['lots', 5, 1],
  ])('maxUnavailable %p of %p replicas allows %p', (value, replicas, allowed) => {
    expect(allowedUnavailable(value, replicas)).toBe(allowed);
  });
});

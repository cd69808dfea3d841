// The test run's own scratch space: every temp dir a test makes lands under the run's
// directory (test/support/global-setup.ts), which the global teardown removes, so a
// `make test` leaves nothing behind in /tmp even where a test's cleanup did not run.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { describe, expect, it } from '@jest/globals';

describe('the test run scratch directory', () => {
  it("is the temp dir of every test worker and lies inside the run's directory", () => {
    const scratch = tmpdir();
    expect(basename(scratch)).toBe('tmp');
    expect(basename(dirname(scratch))).toMatch(/^capi-uo-test-/);
    const made = mkdtempSync(join(tmpdir(), 'capi-uo-scratch-'));
    expect(dirname(made)).toBe(scratch);
  });
});

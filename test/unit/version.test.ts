// Which build a process says it is (src/version.ts): the image's stamp, else a checkout's
// package.json version marked -dev; a malformed stamp stops the start naming the variable.
import { describe, expect, it } from '@jest/globals';
import { readFileSync } from 'node:fs';
import { buildInfo, VersionError } from '../../src/version.ts';

const pkg = (version: unknown) => () => JSON.stringify({ name: 'capi-upgrade-orchestrator', version });

describe('buildInfo', () => {
  it("reports the image's CAPI_UPGRADE_VERSION and Worker Versioning build id", () => {
    expect(buildInfo({ CAPI_UPGRADE_VERSION: 'v0.2.0', TEMPORAL_WORKER_BUILD_ID: 'abc123' }, pkg('0.1.0'))).toEqual({
      version: 'v0.2.0',
      buildId: 'abc123',
      node: process.version,
    });
    expect(buildInfo({ CAPI_UPGRADE_VERSION: 'v1.0.0-rc.1' }, pkg('0.1.0')).version).toBe('v1.0.0-rc.1');
  });

  it("marks a checkout's package.json version as a development build, never as the release", () => {
    expect(buildInfo({}, pkg('0.3.1'))).toEqual({ version: 'v0.3.1-dev', buildId: '', node: process.version });
    expect(buildInfo({}, pkg(42)).version).toBe('v0.0.0-dev');
    const own = (
      JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }
    ).version;
    expect(buildInfo({}).version).toBe(`v${own}-dev`);
  });

  it.each(['0.2.0', 'v0.2', 'latest', 'v0.2.0 ', 'v0.2.0-"quoted"', `v0.2.0-${'x'.repeat(80)}`])(
    'refuses CAPI_UPGRADE_VERSION=%j naming the variable',
    (stamp) => {
      expect(() => buildInfo({ CAPI_UPGRADE_VERSION: stamp }, pkg('0.1.0'))).toThrow(VersionError);
      expect(() => buildInfo({ CAPI_UPGRADE_VERSION: stamp }, pkg('0.1.0'))).toThrow(
        /^CAPI_UPGRADE_VERSION=.*expected vMAJOR\.MINOR\.PATCH/,
      );
    },
  );
});

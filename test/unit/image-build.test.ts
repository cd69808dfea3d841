// scripts/image.ts's pure parts (make image): where IMAGE= pushes to, the Debian pins it builds
// from, and the build args in the configuration. The image itself is built, run and pushed in
// test/nodes/image.test.ts (root, the local registry).
import { describe, expect, it } from '@jest/globals';
import { readDebPins } from '../../scripts/image/inputs.ts';
import { parsePushTarget, runtimeConfig } from '../../scripts/image.ts';

describe('make image', () => {
  it('pushes IMAGE=host[:port]/name[:tag] to https://host, tagged with the version when it names no tag', () => {
    expect(parsePushTarget('127.0.0.1:5000/capi-upgrade-orchestrator', 'v0.2.0')).toEqual({
      url: 'https://127.0.0.1:5000',
      repository: 'capi-upgrade-orchestrator',
      tag: 'v0.2.0',
    });
    expect(parsePushTarget('registry.example.com/platform/cuo:rc1', 'latest')).toEqual({
      url: 'https://registry.example.com',
      repository: 'platform/cuo',
      tag: 'rc1',
    });
    expect(() => parsePushTarget('capi-upgrade-orchestrator', 'v0.2.0')).toThrow('expected host[:port]/name[:tag]');
  });

  it('pins every Debian package by version and sha256: the C and C++ runtimes node and the core bridge link, and the CAs', () => {
    const pins = readDebPins();
    expect(pins.map((p) => p.name).sort()).toEqual(['ca-certificates', 'libc6', 'libgcc-s1', 'libstdc++6']);
    for (const pin of pins) {
      expect(pin.sha256).toMatch(/^[0-9a-f]{64}$/);
      expect(pin.version).toMatch(/^\d/);
      expect(['amd64', 'all']).toContain(pin.architecture);
    }
  });

  it('stamps VERSION, BUILD_ID and REVISION as the Dockerfile does', () => {
    const c = runtimeConfig({ version: 'v0.2.0', buildId: 'abc1234', revision: 'f00' }, 'v24.21.0');
    expect(c.env).toEqual(
      expect.arrayContaining([
        'NODE_VERSION=24.21.0',
        'TEMPORAL_WORKER_BUILD_ID=abc1234',
        'CAPI_UPGRADE_VERSION=v0.2.0',
      ]),
    );
    expect(c.labels?.['org.opencontainers.image.version']).toBe('v0.2.0');
    expect(c.labels?.['org.opencontainers.image.revision']).toBe('f00');
  });
});

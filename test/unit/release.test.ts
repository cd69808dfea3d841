// `make release` (scripts/release.ts): its input checks, and what it makes of config/ and
// CHANGELOG.md. The real clusterctl installs its output in test/capi/clusterctl.test.ts.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from '@jest/globals';
import {
  checksums,
  DEFAULT_IMAGE_REPOSITORY,
  documentNamespace,
  instanceName,
  metadataYaml,
  parseImage,
  parseVersion,
  ReleaseInputError,
  releaseComponents,
  releaseNotes,
} from '../../scripts/release.ts';

const v = parseVersion('v0.2.0');
const CHANGELOG = `# Changelog

## [Unreleased]

### Added

- next thing

## [0.1.0] - 2026-11-25

### Added

- first thing

[Unreleased]: https://example.com/compare/v0.1.0...HEAD
[0.1.0]: https://example.com/releases/tag/v0.1.0
`;

describe('make release input', () => {
  it('takes a semantic version with a leading v', () => {
    expect(parseVersion('v0.2.0')).toEqual({ tag: 'v0.2.0', major: 0, minor: 2, patch: 0 });
    expect(parseVersion('v1.0.0-rc.1').tag).toBe('v1.0.0-rc.1');
  });

  it.each([undefined, '', '0.2.0', 'v0.2', 'v1', 'latest', 'v0.2.0.1', 'v01.2.3'])(
    'refuses VERSION=%j with an example of a good one',
    (raw) => {
      expect(() => parseVersion(raw)).toThrow(ReleaseInputError);
      expect(() => parseVersion(raw)).toThrow(/VERSION.*e\.g\. make release VERSION=v0\.2\.0/);
    },
  );

  it('tags an IMAGE without tag or digest with the version, and refuses what is no image reference', () => {
    expect(parseImage(undefined, v)).toBe(`${DEFAULT_IMAGE_REPOSITORY}:v0.2.0`);
    expect(parseImage('registry.example.com:5000/me/cuo', v)).toBe('registry.example.com:5000/me/cuo:v0.2.0');
    expect(parseImage('me/cuo:custom', v)).toBe('me/cuo:custom');
    const digest = `me/cuo@sha256:${'a'.repeat(64)}`;
    expect(parseImage(digest, v)).toBe(digest);
    for (const bad of ['Me/Cuo', 'me/cuo:', 'me cuo', '${IMAGE}', 'me/cuo@sha256:abc'])
      expect(() => parseImage(bad, v)).toThrow(/^IMAGE=.* is not an image reference/);
  });
});

describe('release assets', () => {
  const rendered = `apiVersion: v1
kind: Namespace
metadata:
  labels:
    app.kubernetes.io/version: __RELEASE_VERSION__
  name: capi-upgrade-orchestrator-system
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: capi-upgrade-orchestrator-api
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: capi-upgrade-orchestrator-api
subjects:
- kind: ServiceAccount
  name: capi-upgrade-orchestrator-api
  namespace: capi-upgrade-orchestrator-system
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  namespace: capi-upgrade-orchestrator-system
data:
  LOG_LEVEL: \${CAPI_UPGRADE_LOG_LEVEL:=info}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: api
  namespace: capi-upgrade-orchestrator-system
spec:
  template:
    spec:
      containers:
      - image: __RELEASE_IMAGE__:__RELEASE_TAG__
---
apiVersion: batch/v1
kind: Job
metadata:
  name: promote-worker
spec:
  backoffLimit: 3
  template:
    spec:
      restartPolicy: Never
      containers:
      - image: __RELEASE_IMAGE__:__RELEASE_TAG__
---
apiVersion: cert-manager.io/v1
kind: Certificate
metadata:
  name: capi-upgrade-orchestrator-client
  namespace: capi-system
`;

  it('fills the tokens, quotes variables, names cluster RBAC for clusterctl and moves foreign namespaces out', () => {
    const { components, clientCertificates } = releaseComponents(rendered, { version: v, image: 'me/cuo:v0.2.0' });
    expect(components).toContain('app.kubernetes.io/version: v0.2.0');
    // A Deployment's image is a reference clusterctl's image overrides can parse (also on
    // `generate provider --describe`, which substitutes no variable); they skip Jobs, so the
    // promote Job's is a variable.
    expect(components).toContain('kind: Deployment\n');
    expect(components).toContain('      - image: me/cuo:v0.2.0\n---\napiVersion: batch/v1');
    expect(components).toContain('- image: "${CAPI_UPGRADE_PROMOTE_IMAGE:=me/cuo:v0.2.0}"');
    expect(components).not.toContain('CAPI_UPGRADE_IMAGE');
    expect(components).toContain('LOG_LEVEL: "${CAPI_UPGRADE_LOG_LEVEL:=info}"');
    // clusterctl deletes cluster-wide objects only under `<namespace>-`; the subject stays the ServiceAccount.
    expect(components).toContain('  name: capi-upgrade-orchestrator-system-api\nroleRef:');
    expect(components).toContain('  kind: ClusterRole\n  name: capi-upgrade-orchestrator-system-api\nsubjects:');
    expect(components).toContain('- kind: ServiceAccount\n  name: capi-upgrade-orchestrator-api\n');
    expect(components).not.toContain('capi-system');
    expect(clientCertificates).toContain('namespace: capi-system');
    expect(clientCertificates).not.toContain('kind: Namespace');
    expect(instanceName('capi-upgrade-orchestrator-worker')).toBe('capi-upgrade-orchestrator-system-worker');
  });

  it('refuses components without exactly one Namespace, and leaves no token unfilled', () => {
    const noNamespace = rendered.replace('kind: Namespace', 'kind: ConfigMap');
    expect(() => releaseComponents(noNamespace, { version: v, image: 'me/cuo' })).toThrow(/0 Namespaces/);
    expect(() => releaseComponents(`${rendered}  x: __RELEASE_OTHER__\n`, { version: v, image: 'me/cuo' })).toThrow(
      /__RELEASE_OTHER__/,
    );
  });

  it('reads metadata.namespace only from metadata', () => {
    expect(documentNamespace('kind: X\nmetadata:\n  name: a\nspec:\n  namespace: b\n')).toBe('');
    expect(documentNamespace('kind: X\nmetadata:\n  labels:\n    a: b\n  namespace: ns\n')).toBe('ns');
  });

  it('maps every release series in CHANGELOG.md and this one to the v1beta2 contract', () => {
    expect(metadataYaml(parseVersion('v1.0.0'), CHANGELOG)).toBe(
      [
        '# Release series of capi-upgrade-orchestrator and the Cluster API contract each implements.',
        'apiVersion: clusterctl.cluster.x-k8s.io/v1alpha3',
        'kind: Metadata',
        'releaseSeries:',
        '  - major: 1\n    minor: 0\n    contract: v1beta2',
        '  - major: 0\n    minor: 1\n    contract: v1beta2',
        '',
      ].join('\n'),
    );
  });

  it('cuts the notes from the Unreleased section for a version newer than every released one', () => {
    expect(releaseNotes(CHANGELOG, v)).toEqual({
      notes: '# capi-upgrade-orchestrator v0.2.0\n\n### Added\n\n- next thing\n',
      fromUnreleased: true,
    });
    expect(releaseNotes(CHANGELOG, parseVersion('v1.0.0-rc.1')).fromUnreleased).toBe(true);
    expect(() => releaseNotes('# Changelog\n', v)).toThrow(/neither a \[0\.2\.0\] nor an \[Unreleased\] section/);
  });

  it('refuses a version CHANGELOG.md has already released: its notes are not what this checkout holds', () => {
    // The first-run report: VERSION=v0.1.0 gave the old [0.1.0] notes ("installed with kubectl apply -k") for
    // components that hold everything under [Unreleased] since.
    expect(() => releaseNotes(CHANGELOG, parseVersion('v0.1.0'))).toThrow(
      new ReleaseInputError(
        'CHANGELOG.md already has [0.1.0] - 2026-11-25, and [Unreleased] holds changes since: release them as a newer version (VERSION=v0.2.0), or move [Unreleased] to a new version section first',
      ),
    );
    expect(() => releaseNotes(CHANGELOG, parseVersion('v0.0.9'))).toThrow(
      /v0\.0\.9 is older than \[0\.1\.0\], the newest release in CHANGELOG\.md: VERSION=v0\.2\.0/,
    );
    const real = readFileSync(join(import.meta.dirname, '../../CHANGELOG.md'), 'utf8');
    expect(() => releaseNotes(real, parseVersion('v0.1.0'))).toThrow(/already has \[0\.1\.0\]/);
  });

  it("cuts the notes from the version's own section once [Unreleased] has moved there (and is empty)", () => {
    const cut = CHANGELOG.replace('## [Unreleased]\n', '## [Unreleased]\n\n## [0.2.0] - 2026-12-01\n');
    expect(releaseNotes(cut, v)).toEqual({
      notes: '# capi-upgrade-orchestrator v0.2.0\n\n### Added\n\n- next thing\n',
      fromUnreleased: false,
    });
    // Not the newest section: released before something else.
    expect(() => releaseNotes(cut, parseVersion('v0.1.0'))).toThrow(/already has \[0\.1\.0\] - 2026-11-25/);
  });

  it('writes sha256sum lines, sorted by file', () => {
    expect(checksums({ 'b.txt': 'b', 'a.txt': '' })).toBe(
      'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855  a.txt\n' +
        '3e23e8160039594a33894f6564e1b1348bbd7a0088d42c4acb73eeaed59c009d  b.txt\n',
    );
  });
});

// A workload kubeconfig is data, never code: only a server URL, CA data, client
// certificate/key data or a bearer token pass; exec plugins, auth providers,
// file references, proxies and the rest are refused by their path.
import { describe, expect, it } from '@jest/globals';
import { KubeConfig } from '@kubernetes/client-node';
import type { ApplicationFailure } from '@temporalio/common';
import { stableFailure } from '../../src/activities/failures.ts';
import { KubeError } from '../../src/platform/kube/errors.ts';
import { parseWorkloadKubeconfig, WORKLOAD_KUBECONFIG_REFUSED } from '../../src/platform/kube/workload-clusters.ts';
import { checkWorkloadKubeconfig } from '../../src/domain/workload-kubeconfig.ts';

/** The shape Cluster API writes (KubeadmControlPlane): server + CA data, client cert/key data. */
function capiKubeconfig(): Record<string, unknown> {
  return {
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'c1', cluster: { server: 'https://10.0.0.1:6443', 'certificate-authority-data': 'Q0E=' } }],
    contexts: [{ name: 'c1-admin@c1', context: { cluster: 'c1', user: 'c1-admin' } }],
    users: [{ name: 'c1-admin', user: { 'client-certificate-data': 'Q0VSVA==', 'client-key-data': 'S0VZ' } }],
    'current-context': 'c1-admin@c1',
    preferences: {},
  };
}

function withUser(user: Record<string, unknown>): Record<string, unknown> {
  return { ...capiKubeconfig(), users: [{ name: 'c1-admin', user }] };
}

function withCluster(cluster: Record<string, unknown>): Record<string, unknown> {
  return { ...capiKubeconfig(), clusters: [{ name: 'c1', cluster }] };
}

describe('checkWorkloadKubeconfig', () => {
  it('accepts what Cluster API writes, and returns exactly its data fields', () => {
    expect(checkWorkloadKubeconfig(capiKubeconfig())).toEqual({
      ok: true,
      config: {
        clusters: [{ name: 'c1', server: 'https://10.0.0.1:6443', caData: 'Q0E=' }],
        users: [{ name: 'c1-admin', certData: 'Q0VSVA==', keyData: 'S0VZ' }],
        contexts: [{ name: 'c1-admin@c1', cluster: 'c1', user: 'c1-admin' }],
        currentContext: 'c1-admin@c1',
      },
    });
  });

  it('accepts a bearer token (managed control planes write one)', () => {
    const check = checkWorkloadKubeconfig(withUser({ token: 't0k3n' }));
    expect(check).toMatchObject({ ok: true, config: { users: [{ name: 'c1-admin', token: 't0k3n' }] } });
  });

  it.each([
    [{ exec: { command: 'sh', args: ['-c', 'touch /tmp/x'], apiVersion: 'client.authentication.k8s.io/v1' } }, 'exec'],
    [{ 'auth-provider': { name: 'oidc', config: {} } }, 'auth-provider'],
    [{ 'token-file': '/var/run/secrets/kubernetes.io/serviceaccount/token' }, 'token-file'],
    [{ tokenFile: '/etc/token' }, 'tokenFile'],
    [{ 'client-certificate': '/etc/cert.pem', 'client-key-data': 'S0VZ' }, 'client-certificate'],
    [{ 'client-key': '/etc/key.pem' }, 'client-key'],
    [{ username: 'admin', password: 'secret' }, 'username'],
    [{ token: 't', as: 'system:admin' }, 'as'],
    [{ token: 't', 'as-groups': ['system:masters'] }, 'as-groups'],
    [{ token: 't', 'something-new': 'x' }, 'something-new'],
  ])('refuses users[0].user %#, naming the field', (user, field) => {
    const check = checkWorkloadKubeconfig(withUser(user));
    expect(check).toMatchObject({ ok: false, field: `users[0].user.${field}` });
  });

  it.each([
    [{ server: 'https://a:6443', 'certificate-authority': '/etc/ca.pem' }, 'certificate-authority'],
    [{ server: 'https://a:6443', 'proxy-url': 'http://proxy:3128' }, 'proxy-url'],
    [{ server: 'https://a:6443', 'insecure-skip-tls-verify': true }, 'insecure-skip-tls-verify'],
    [{ server: 'https://a:6443', 'tls-server-name': 'b' }, 'tls-server-name'],
    [{ server: 'http://a:6443' }, 'server'],
    [{ server: 'https://user:pw@a:6443' }, 'server'],
    [{ server: 'not a url' }, 'server'],
    [{ 'certificate-authority-data': 'Q0E=' }, 'server'],
  ])('refuses clusters[0].cluster %#, naming the field', (cluster, field) => {
    expect(checkWorkloadKubeconfig(withCluster(cluster))).toMatchObject({
      ok: false,
      field: `clusters[0].cluster.${field}`,
    });
  });

  it('accepts a refused field only when it is switched off (null, or false as client-node exports it)', () => {
    const off = withCluster({ server: 'https://a:6443', 'insecure-skip-tls-verify': false, 'proxy-url': null });
    expect(checkWorkloadKubeconfig(off)).toMatchObject({
      ok: true,
      config: { clusters: [{ server: 'https://a:6443' }] },
    });
    expect(checkWorkloadKubeconfig(withUser({ token: 't', exec: null }))).toMatchObject({ ok: true });
    expect(checkWorkloadKubeconfig(withUser({ token: 't', exec: {} }))).toMatchObject({ field: 'users[0].user.exec' });
  });

  it("accepts what client-node's own exportConfig writes", () => {
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: 'c', server: 'https://a:6443', caData: 'Q0E=', skipTLSVerify: false }],
      users: [{ name: 'u', token: 't' }],
      contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
      currentContext: 'x',
    });
    expect(checkWorkloadKubeconfig(JSON.parse(kc.exportConfig()))).toMatchObject({ ok: true });
  });

  it('checks every user, not only the current context', () => {
    const doc = {
      ...capiKubeconfig(),
      users: [
        { name: 'c1-admin', user: { token: 't' } },
        { name: 'other', user: { exec: { command: 'sh' } } },
      ],
    };
    expect(checkWorkloadKubeconfig(doc)).toMatchObject({ ok: false, field: 'users[1].user.exec' });
  });

  it('refuses unknown top-level fields, dangling references and non-mappings, never quoting a value', () => {
    expect(checkWorkloadKubeconfig({ ...capiKubeconfig(), 'proxy-url': 'x' })).toMatchObject({ field: 'proxy-url' });
    expect(checkWorkloadKubeconfig({ ...capiKubeconfig(), 'current-context': 'nope' })).toMatchObject({
      field: 'current-context',
    });
    const dangling = {
      ...capiKubeconfig(),
      contexts: [{ name: 'c1-admin@c1', context: { cluster: 'c2', user: 'x' } }],
    };
    expect(checkWorkloadKubeconfig(dangling)).toMatchObject({ field: 'contexts[0].context.cluster' });
    expect(checkWorkloadKubeconfig('a string')).toMatchObject({ ok: false, field: '(document)' });
    expect(checkWorkloadKubeconfig({ ...capiKubeconfig(), users: 'x' })).toMatchObject({ field: 'users' });
    const secret = 'S3CR3T-VALUE';
    const check = checkWorkloadKubeconfig(withUser({ token: secret, exec: { command: secret } }));
    expect(JSON.stringify(check)).not.toContain(secret);
  });
});

describe('parseWorkloadKubeconfig', () => {
  const where = 'Secret ns/c1-kubeconfig';
  // The platform throws a plain KubeError; the activity edge makes it this ApplicationFailure.
  const failure = (text: string): ApplicationFailure => {
    try {
      parseWorkloadKubeconfig(where, Buffer.from(text));
    } catch (err) {
      if (err instanceof KubeError) return stableFailure(err);
      throw err;
    }
    throw new Error('accepted');
  };

  it('fails non-retryably naming the Secret and the field, not the contents', () => {
    const yaml = [
      'apiVersion: v1',
      'clusters: [{name: c, cluster: {server: "https://a:6443"}}]',
      'contexts: [{name: c, context: {cluster: c, user: u}}]',
      "users: [{name: u, user: {exec: {command: sh, args: ['-c', 'touch /tmp/marker-S3CR3T']}}}]",
      'current-context: c',
    ].join('\n');
    const f = failure(yaml);
    expect(f).toMatchObject({ type: WORKLOAD_KUBECONFIG_REFUSED, nonRetryable: true });
    expect(f.message).toBe(
      'Secret ns/c1-kubeconfig: users[0].user.exec is refused (runs a credential plugin command); ' +
        'a workload kubeconfig may hold only a server URL, CA data, client certificate/key data or a bearer token',
    );
  });

  it('a YAML error names the line, never the text around it', () => {
    const f = failure('users:\n  - name: u\n    user: {token: "S3CR3T\n');
    expect(f.nonRetryable).toBe(true);
    expect(f.message).toMatch(/^Secret ns\/c1-kubeconfig holds no valid kubeconfig: not YAML \(line \d+\)$/);
    expect(f.message).not.toContain('S3CR3T');
  });

  it('refuses an oversized kubeconfig before parsing it', () => {
    const f = failure(`# ${'x'.repeat(300 * 1024)}\n`);
    expect(f.message).toMatch(/^Secret ns\/c1-kubeconfig holds a kubeconfig of \d+ bytes, over the 262144-byte limit$/);
  });
});

// Renders the CRDs and admission webhook configurations of the Cluster API
// providers for managers that run as local processes (scripts/capi.sh): what each
// provider's kustomize config/default does, minus cert-manager and the Service:
//   - every CRD gets its provider's labels (cluster.x-k8s.io/provider and the
//     contract labels core CAPI uses to find a provider's CRD versions) and a
//     conversion webhook at https://127.0.0.1:<port>/convert by url + caBundle;
//   - every (Validating|Mutating)WebhookConfiguration is renamed with the
//     provider's prefix (the upstream names clash) and each webhook points at
//     https://127.0.0.1:<port><path> by url + caBundle.
//
//   node scripts/capi-render-providers.mjs <config.json>   # YAML stream on stdout
//
// config.json: { "caFile": "...", "providers": [ { "name", "prefix", "port",
//   "labels": {..}, "crdFiles": [..], "webhookFile": ".." } ] }
import { Buffer } from 'node:buffer';
import { readFileSync } from 'node:fs';
import process from 'node:process';
import { parseAllDocuments, stringify } from 'yaml';

const config = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const caBundle = Buffer.from(readFileSync(config.caFile)).toString('base64');

function docs(file) {
  return parseAllDocuments(readFileSync(file, 'utf8'))
    .map((d) => {
      if (d.errors.length > 0) throw new Error(`${file}: ${d.errors[0].message}`);
      return d.toJS();
    })
    .filter((o) => o && typeof o === 'object');
}

const out = [];
for (const p of config.providers) {
  const base = `https://127.0.0.1:${p.port}`;
  for (const file of p.crdFiles) {
    for (const crd of docs(file)) {
      if (crd.kind !== 'CustomResourceDefinition') continue;
      crd.metadata.labels = { ...(crd.metadata.labels ?? {}), ...p.labels };
      // Upstream annotates for cert-manager's CA injection; the CA is inline here.
      delete crd.metadata.annotations?.['cert-manager.io/inject-ca-from'];
      crd.spec.conversion = {
        strategy: 'Webhook',
        webhook: {
          conversionReviewVersions: ['v1'],
          clientConfig: { url: `${base}/convert`, caBundle },
        },
      };
      out.push(crd);
    }
  }
  for (const cfg of docs(p.webhookFile)) {
    if (!/^(Validating|Mutating)WebhookConfiguration$/.test(cfg.kind)) continue;
    cfg.metadata.name = `${p.prefix}${cfg.metadata.name}`;
    cfg.metadata.labels = {
      ...(cfg.metadata.labels ?? {}),
      'cluster.x-k8s.io/provider': p.labels['cluster.x-k8s.io/provider'],
    };
    for (const w of cfg.webhooks ?? []) {
      const path = w.clientConfig?.service?.path;
      if (!path) throw new Error(`${p.webhookFile}: webhook ${w.name} has no service path`);
      w.clientConfig = { url: `${base}${path}`, caBundle };
    }
    out.push(cfg);
  }
}
process.stdout.write(out.map((o) => stringify(o, { lineWidth: 0 })).join('---\n'));

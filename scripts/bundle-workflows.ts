// Prebuilds the workflow bundle for production images, so a worker starts
// without webpack (WORKFLOW_BUNDLE_PATH points at the output).
//   node scripts/bundle-workflows.ts dist/workflow-bundle.js
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { bundleWorkflowCode } from '@temporalio/worker';

const out = resolve(process.argv[2] ?? 'dist/workflow-bundle.js');
const { code } = await bundleWorkflowCode({ workflowsPath: resolve('src/workflows/index.ts') });
mkdirSync(dirname(out), { recursive: true });
writeFileSync(out, code);
console.log(`workflow bundle written to ${out} (${(code.length / 1024).toFixed(0)} KiB)`);

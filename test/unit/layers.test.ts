// The picture of imports has no arrow that runs back up. src is built in floors, each importing
// only its own floor and the ones below:
//   0 model        shared vocabulary (types, names, search attributes)
//   1 domain       pure rules
//   2 platform     the adapters: kube/ to Kubernetes (errors as plain typed errors: no Temporal
//                  package), temporal/ to the workflow service (connection, clients, Worker Versioning)
//   3 activities, workflows (a workflow imports activities' types only: the lint rule says why;
//     an activity imports no workflow code but the message definitions, the workflows' contract,
//     to signal one as the api does)
//   4 process settings: config/ (the only reader of process.env: variables.ts declares each variable), log.ts
//   5 api, cli, ops, local, the worker and main; on this floor the api reaches Kubernetes through
//     the platform, never through activities (whose errors are Temporal failures), and ops
//     (jobs and probes the api also uses) imports nothing of the api
// @temporalio/client is held only in platform/temporal, the process wiring (main, worker*,
// temporal-setup) and the api and cli: never in ops or local (they use platform/temporal's ports and
// sessions), activities, workflows, domain, model, config or platform/kube.
// And the tests and the benches share code only through src/ and support/ (neither imports the other;
// support/ and src/ import neither).
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';
import { describe, expect, it } from '@jest/globals';

interface Arrow {
  from: string;
  to: string;
  typeOnly: boolean;
}

const FLOORS: readonly [prefix: string, floor: number][] = [
  ['src/model/', 0],
  ['src/domain/', 1],
  ['src/platform/', 2],
  ['src/activities/', 3],
  ['src/workflows/', 3],
  ['src/config/', 4],
  ['src/log.ts', 4],
];

/** The signal, query and update definitions: what the workflows offer everyone else. */
const WORKFLOW_MESSAGES = 'src/workflows/messages.ts';

/** Arrows forbidden within a floor, by the prefixes of their ends. */
const SIDEWAYS: readonly [from: string, to: string][] = [
  ['src/api/', 'src/activities/'],
  ['src/ops/', 'src/api/'],
];

/** The floor of a file under src/ (anything not listed is the top floor). */
function floorOf(file: string): number {
  return FLOORS.find(([prefix]) => file.startsWith(prefix))?.[1] ?? 5;
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && e.name.endsWith('.ts'))
    .map((e) => relative('.', join(e.parentPath, e.name)).split('\\').join('/'));
}

// Static imports and re-exports with a relative path; `import type` / `export type` are type-only.
const IMPORT = /^\s*(?:import|export)(\s+type)?\s[^;]*?\sfrom\s+'(\.[^']+)'/gms;
const DYNAMIC = /\bimport\(\s*'(\.[^']+)'\s*\)/g;

function arrowsOf(file: string, text: string): Arrow[] {
  const to = (spec: string) =>
    normalize(join(dirname(file), spec))
      .split('\\')
      .join('/');
  return [
    ...[...text.matchAll(IMPORT)].map((m) => ({ from: file, to: to(m[2] ?? ''), typeOnly: m[1] !== undefined })),
    ...[...text.matchAll(DYNAMIC)].map((m) => ({ from: file, to: to(m[1] ?? ''), typeOnly: false })),
  ];
}

/** Each arrow that breaks the floors, as `from → to`. */
function upwardArrows(arrows: readonly Arrow[]): string[] {
  const bad: string[] = [];
  for (const a of arrows) {
    if (!a.from.startsWith('src/') || !a.to.startsWith('src/')) continue;
    const up = floorOf(a.to) > floorOf(a.from);
    // Workflows are deterministic: they reach Kubernetes only through activities.
    const workflowToPlatform = a.from.startsWith('src/workflows/') && a.to.startsWith('src/platform/');
    const workflowToActivity = a.from.startsWith('src/workflows/') && a.to.startsWith('src/activities/');
    const activityToWorkflow =
      a.from.startsWith('src/activities/') && a.to.startsWith('src/workflows/') && a.to !== WORKFLOW_MESSAGES;
    const sideways = SIDEWAYS.some(([from, to]) => a.from.startsWith(from) && a.to.startsWith(to));
    if (up || sideways || activityToWorkflow || workflowToPlatform || (workflowToActivity && !a.typeOnly))
      bad.push(`${a.from} → ${a.to}`);
  }
  return bad;
}

/** Whether a module imports a Temporal package (type-only imports included). */
function importsTemporal(text: string): boolean {
  return /^\s*(?:import|export)\b[^;]*?\sfrom\s+'@temporalio\//ms.test(text);
}

/** Whether a module imports @temporalio/client (statically, type-only included, or by `import()`). */
function importsTemporalClient(text: string): boolean {
  return (
    /^\s*(?:import|export)\b[^;]*?\sfrom\s+'@temporalio\/client'/ms.test(text) ||
    /\bimport\(\s*'@temporalio\/client'\s*\)/.test(text)
  );
}

/**
 * Where a Temporal Client (or any of @temporalio/client) may be held: the platform's Temporal
 * adapter, the processes that wire it (main, the worker, the search-attribute setup) and the edge
 * floor that talks to the workflow service directly (api, cli). Ops and local go through platform/temporal
 * (ports, sessions, Worker Deployment calls), and so do the activities, which reach other workflows
 * through its ports; domain, model, workflows and config never hold one.
 */
const TEMPORAL_CLIENT_HOLDERS: readonly string[] = [
  'src/platform/temporal/',
  'src/main.ts',
  'src/worker.ts',
  'src/worker-host.ts',
  'src/temporal-setup.ts',
  'src/api/',
  'src/cli/',
];

/** Files under src/ that import @temporalio/client outside the holders. */
function strayTemporalClients(files: readonly { file: string; text: string }[]): string[] {
  return files
    .filter(({ file }) => !TEMPORAL_CLIENT_HOLDERS.some((h) => file.startsWith(h)))
    .filter(({ text }) => importsTemporalClient(text))
    .map(({ file }) => file);
}

/**
 * Files outside src/config that read process.env themselves, and why. Everything else asks
 * src/config for a declared variable, so each is parsed and reported in one place.
 */
const PROCESS_ENV_READERS: readonly string[] = [
  // The activities' fallback when given no KubeConfig (their tests) finds the management cluster by
  // MANAGEMENT_KUBECONFIG; the platform floor cannot import config. Processes pass it from config.
  'src/platform/kube/clients.ts',
];

/** Files under src/ outside src/config (and the readers above) that read process.env. */
function strayEnvReaders(files: readonly { file: string; text: string }[]): string[] {
  return files
    .filter(({ file }) => !file.startsWith('src/config/') && !PROCESS_ENV_READERS.includes(file))
    .filter(({ text }) => /\bprocess\.env\b/.test(text))
    .map(({ file }) => file);
}

/** Arrows between the tests and the benches, and from src or support/ into either. */
function crossedArrows(arrows: readonly Arrow[]): string[] {
  const top = (f: string) => f.split('/')[0];
  const forbidden = new Set([
    'test→bench',
    'bench→test',
    'src→test',
    'src→bench',
    'src→support',
    'support→test',
    'support→bench',
  ]);
  return arrows.filter((a) => forbidden.has(`${top(a.from)}→${top(a.to)}`)).map((a) => `${a.from} → ${a.to}`);
}

const allArrows = ['src', 'test', 'bench', 'support']
  .flatMap((dir) => {
    try {
      return sourceFiles(dir);
    } catch {
      return []; // a folder that does not exist has no imports
    }
  })
  .flatMap((file) => arrowsOf(file, readFileSync(file, 'utf8')));

describe('import floors', () => {
  it('finds the imports of every source file', () => {
    expect(allArrows.filter((a) => a.from.startsWith('src/')).length).toBeGreaterThan(300);
    expect(allArrows).toContainEqual({
      from: 'src/domain/in-place.ts',
      to: 'src/domain/json-pointer.ts',
      typeOnly: false,
    });
  });

  it('flags an import that runs back up', () => {
    const sample = [
      ...arrowsOf('src/model/x.ts', "import { y } from '../domain/y.ts';"),
      ...arrowsOf('src/domain/x.ts', "import type { Z } from '../api/z.ts';"),
      ...arrowsOf('src/workflows/x.ts', "import { run } from '../activities/run.ts';"),
      ...arrowsOf('src/workflows/ok.ts', "import type { Run } from '../activities/run.ts';"),
      ...arrowsOf('src/config/x.ts', "import { hooks } from '../api/contract.ts';"),
      ...arrowsOf('src/api/ok.ts', "import { m } from '../model/m.ts';"),
      ...arrowsOf('src/platform/x.ts', "import { stableFailure } from '../activities/failures.ts';"),
      ...arrowsOf('src/workflows/y.ts', "import type { Gate } from '../platform/kube/gate.ts';"),
      ...arrowsOf('src/activities/ok.ts', "import { listPaged } from '../platform/kube/paged-list.ts';"),
      ...arrowsOf('src/api/x.ts', "import type { Failure } from '../activities/failures.ts';"),
      ...arrowsOf('src/ops/x.ts', "import { grpcStatus } from '../api/temporal-calls.ts';"),
      ...arrowsOf('src/api/ok.ts', "import { hookRequestChecks } from '../ops/metrics.ts';"),
      ...arrowsOf('src/api/ok.ts', "import { stableError } from '../platform/kube/stable-error.ts';"),
      ...arrowsOf('src/ops/ok.ts', "import { grpcStatus } from '../platform/temporal/grpc-status.ts';"),
      ...arrowsOf('src/activities/x.ts', "import { run } from '../workflows/run.ts';"),
      ...arrowsOf('src/activities/ok.ts', "import { abortSignal } from '../workflows/messages.ts';"),
    ];
    expect(upwardArrows(sample)).toEqual([
      'src/model/x.ts → src/domain/y.ts',
      'src/domain/x.ts → src/api/z.ts',
      'src/workflows/x.ts → src/activities/run.ts',
      'src/config/x.ts → src/api/contract.ts',
      'src/platform/x.ts → src/activities/failures.ts',
      'src/workflows/y.ts → src/platform/kube/gate.ts',
      'src/api/x.ts → src/activities/failures.ts',
      'src/ops/x.ts → src/api/temporal-calls.ts',
      'src/activities/x.ts → src/workflows/run.ts',
    ]);
    const crossed = [
      ...arrowsOf('test/unit/x.test.ts', "import { env } from '../../bench/env.ts';"),
      ...arrowsOf('bench/x.ts', "const rig = await import('../test/support/rig.ts');"),
      ...arrowsOf('bench/ok.ts', "import { rig } from '../support/rig.ts';"),
    ];
    expect(crossedArrows(crossed)).toEqual(['test/unit/x.test.ts → bench/env.ts', 'bench/x.ts → test/support/rig.ts']);
  });

  it('src has no upward arrow', () => {
    expect(upwardArrows(allArrows)).toEqual([]);
  });

  it('the Kubernetes adapter knows no Temporal type: its errors are plain', () => {
    expect(importsTemporal("import type { ApplicationFailure } from '@temporalio/common';")).toBe(true);
    expect(importsTemporal("import { ApiException } from '@kubernetes/client-node';")).toBe(false);
    const temporal = sourceFiles('src/platform/kube').filter((f) => importsTemporal(readFileSync(f, 'utf8')));
    expect(temporal).toEqual([]);
  });

  it('@temporalio/client is imported only by platform/temporal, the process wiring and the api and cli', () => {
    expect(importsTemporalClient("import { WorkflowNotFoundError, type Client } from '@temporalio/client';")).toBe(
      true,
    );
    expect(importsTemporalClient("type C = import('@temporalio/client').Client;")).toBe(true);
    expect(importsTemporalClient("import type { SignalDefinition } from '@temporalio/common';")).toBe(false);
    expect(
      strayTemporalClients([
        { file: 'src/activities/x.ts', text: "import type { Client } from '@temporalio/client';" },
        {
          file: 'src/activities/ok.ts',
          text: "import type { WorkflowPort } from '../platform/temporal/workflows.ts';",
        },
        { file: 'src/workflows/x.ts', text: "import { Client } from '@temporalio/client';" },
        { file: 'src/platform/temporal/ok.ts', text: "import { Client } from '@temporalio/client';" },
        { file: 'src/platform/kube/x.ts', text: "import { Connection } from '@temporalio/client';" },
        { file: 'src/api/ok.ts', text: "import type { Client } from '@temporalio/client';" },
      ]),
    ).toEqual(['src/activities/x.ts', 'src/workflows/x.ts', 'src/platform/kube/x.ts']);
    const src = sourceFiles('src').map((file) => ({ file, text: readFileSync(file, 'utf8') }));
    expect(strayTemporalClients(src)).toEqual([]);
    // The activities above all: they signal and read other workflows through platform/temporal's ports.
    expect(src.filter(({ file, text }) => file.startsWith('src/activities/') && importsTemporalClient(text))).toEqual(
      [],
    );
  });

  it('only src/config reads process.env', () => {
    expect(
      strayEnvReaders([
        { file: 'src/cli/x.ts', text: "const who = process.env.USER ?? 'unknown';" },
        { file: 'src/local/y.ts', text: 'spawn(cmd, { env: { ...process.env, A: "1" } });' },
        { file: 'src/config/ok.ts', text: 'parseConfig(process.env);' },
        { file: 'src/cli/ok.ts', text: "variable('USER');" },
      ]),
    ).toEqual(['src/cli/x.ts', 'src/local/y.ts']);
    const src = sourceFiles('src').map((file) => ({ file, text: readFileSync(file, 'utf8') }));
    expect(src.filter(({ file }) => file.startsWith('src/config/')).length).toBeGreaterThan(0);
    expect(strayEnvReaders(src)).toEqual([]);
  });

  it('tests and benches do not import each other, and src imports neither', () => {
    expect(crossedArrows(allArrows)).toEqual([]);
  });
});

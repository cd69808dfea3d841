// What a running `make dev` wrote for the tools beside it (`capi-upgrades demo`):
// where Temporal, the hook server and the management cluster are. Emptied on stop.
import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { variable } from '../config/environment.ts';

export interface DevState {
  temporalAddress: string;
  temporalNamespace: string;
  /** Its Temporal dev server, in a process group of its own (Ctrl-C does not reach it). */
  temporalPid: number;
  /** Absent with the Web UI off. */
  webUi?: string;
  hookUrl: string;
  caFile: string;
  /** Absent without the embedded management cluster (MANAGEMENT=none or MANAGEMENT_KUBECONFIG). */
  management?: {
    kubeconfig: string;
    kubectl: string;
    capiVersion: string;
    /** config/samples/in-memory: the in-memory ClusterClass, Cluster and in-place templates. */
    samplesDir: string;
    extensionName: string;
  };
}

/** `make dev`'s data dir: CAPI_UO_DATA_DIR, else the checkout's .data/ (wherever the tools run from). */
export function devDataDir(given: string | undefined = variable('CAPI_UO_DATA_DIR')): string {
  return resolve(given || new URL('../../.data', import.meta.url).pathname);
}

export function devStateFile(dataDir: string): string {
  return join(dataDir, 'dev.json');
}

/** The state of the `make dev` whose data dir is given; throws naming what is missing. */
export function readDevState(dataDir = devDataDir()): DevState {
  const file = devStateFile(dataDir);
  const state = existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as Partial<DevState>) : {};
  if (!state.temporalAddress)
    throw new Error(`no running \`make dev\` found (${file} is missing or empty): start \`make dev\` first`);
  return state as DevState;
}

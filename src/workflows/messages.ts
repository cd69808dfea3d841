// Signals, queries and the plain-JSON state they carry: imported by the
// workflows, the api and the tests, so a name is spelled in one place.
import { defineSignal } from '@temporalio/workflow';

/** Operator abort: `temporal workflow signal --name abort --input '{"reason":"…"}'`. */
export interface AbortInput {
  reason?: string;
}

export const abortSignal = defineSignal<[AbortInput?]>('abort');
export const resumeSignal = defineSignal<[]>('resume');

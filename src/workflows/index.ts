// The workflow bundle's entry point: every workflow type the worker serves.
export { heartbeatProbeWorkflow } from './heartbeat-probe.ts';

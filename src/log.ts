// The process's logger: JSON lines (pino, like the hook server's), with the
// Temporal SDK's own logs (worker, workflows, activities) routed through it so
// every line is JSON too. Lines about a workflow carry its workflowId and runId
// and, read from the id, the cluster or machine it is about.
import { ApplicationFailure } from '@temporalio/common';
import { DefaultLogger, type LogEntry, type LogLevel } from '@temporalio/worker';
import { pino, type Level, type Logger } from 'pino';

export type { Logger } from 'pino';

export function createLogger(level = 'info'): Logger {
  return pino({ level, base: { component: 'capi-upgrade-orchestrator' } });
}

const PINO_LEVEL: Record<LogLevel, Level> = {
  TRACE: 'trace',
  DEBUG: 'debug',
  INFO: 'info',
  WARN: 'warn',
  ERROR: 'error',
};

/** `cluster-upgrade/<ns>/<cluster>/<uid>` and `machine-update/<ns>/<machine>/<hash>`: what the line is about. */
export function subjectOfWorkflowId(workflowId: unknown): { cluster: string } | { machine: string } | undefined {
  if (typeof workflowId !== 'string') return undefined;
  const [kind, namespace, name] = workflowId.split('/');
  if (!namespace || !name) return undefined;
  if (kind === 'cluster-upgrade' || kind === 'machine-update-slots') return { cluster: `${namespace}/${name}` };
  if (kind === 'machine-update') return { machine: `${namespace}/${name}` };
  return undefined;
}

/** For Runtime.install({ logger }): the SDK's entries as JSON lines of `log`. */
export function temporalSdkLogger(log: Logger, level: string): DefaultLogger {
  const sdkLevel = (Object.keys(PINO_LEVEL) as LogLevel[]).find((l) => PINO_LEVEL[l] === level) ?? 'INFO';
  const sdk = log.child({ source: 'temporal-sdk' });
  return new DefaultLogger(sdkLevel, (entry: LogEntry) => {
    const meta = entry.meta ?? {};
    const error = 'error' in meta ? { error: loggedError(meta.error) } : {};
    sdk[PINO_LEVEL[entry.level]]({ ...meta, ...error, ...subjectOfWorkflowId(meta.workflowId) }, entry.message);
  });
}

/**
 * An error in a log line ("Activity failed"): an application failure (raised on purpose, its message the whole
 * story: no management cluster, a refused kubeconfig) as its type and message; anything else (a bug) with its stack.
 */
function loggedError(error: unknown): unknown {
  if (error instanceof ApplicationFailure)
    return { type: error.type ?? error.name, message: error.message, nonRetryable: error.nonRetryable };
  return error instanceof Error ? pino.stdSerializers.err(error) : error;
}

// The KubeConfig of one workload cluster: its API clients send through the
// bounded transport, in the slots of the process's one ReadGate. The process
// sets the limits once at start (configureWorkloadReads); tests may make their
// own gate.
import { createConfiguration, ServerConfiguration, type ApiConstructor, type ApiType } from '@kubernetes/client-node';
import { BoundedTransport } from './bounded-transport.ts';
import { PooledKubeConfig } from './pooled-kube-config.ts';
import { ReadGate } from './read-gate.ts';
import { DEFAULT_WORKLOAD_READ_LIMITS, type WorkloadReadLimits } from './workload-limits.ts';

let limits: WorkloadReadLimits = DEFAULT_WORKLOAD_READ_LIMITS;
let gate = newGate(limits);

function newGate(l: WorkloadReadLimits): ReadGate {
  return new ReadGate(l.overall, l.perCluster, l.budgetBytes);
}

/** Sets the process's limits (at start, before any workload cluster is read). */
export function configureWorkloadReads(next: WorkloadReadLimits): void {
  limits = next;
  gate = newGate(next);
}

export function workloadReadLimits(): WorkloadReadLimits {
  return limits;
}

/** The process's gate (for its gauges and the tests). */
export function workloadReadGate(): ReadGate {
  return gate;
}

export class WorkloadKubeConfig extends PooledKubeConfig {
  readonly transport: BoundedTransport;
  readonly limits: WorkloadReadLimits;
  /** `namespace/name` of the Cluster. */
  readonly cluster: string;

  constructor(cluster: string, options: { limits?: WorkloadReadLimits; gate?: ReadGate } = {}) {
    super();
    this.cluster = cluster;
    this.limits = options.limits ?? limits;
    this.transport = new BoundedTransport(cluster, this.limits, options.gate ?? gate);
  }

  override makeApiClient<T extends ApiType>(apiClientType: ApiConstructor<T>): T {
    const server = this.getCurrentCluster()?.server;
    if (!server) throw new Error(`workload cluster ${this.cluster}: its kubeconfig names no server`);
    return new apiClientType(
      createConfiguration({
        baseServer: new ServerConfiguration(server, {}),
        authMethods: { default: this },
        httpApi: this.transport.asHttpLibrary(),
      }),
    );
  }
}

/** The limits and cluster of a workload KubeConfig; the process's limits for any other. */
export function readLimitsOf(kc: unknown): { cluster?: string; limits: WorkloadReadLimits } {
  return kc instanceof WorkloadKubeConfig ? { cluster: kc.cluster, limits: kc.limits } : { limits };
}

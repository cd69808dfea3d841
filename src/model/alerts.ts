// The alert gate (no step starts while the cluster's alerts fire) and the Alertmanager silences (the
// upgrade's own disruption pages no one) of a cluster upgrade: plain JSON types shared by the api
// (policy), the workflow (status) and the activities.

/** The gate's id: what its messages name, and what a per-cluster gate override names. */
export const ALERT_GATE_ID = 'alerts';

/** A key of a Secret or ConfigMap; no namespace = the Cluster's (an annotation may name no other). */
export interface ObjectKeyRef {
  kind: 'Secret' | 'ConfigMap';
  namespace?: string;
  name: string;
  key: string;
}

/** An Alertmanager v2 matcher. */
export interface SilenceMatcher {
  name: string;
  value: string;
  isRegex: boolean;
  isEqual: boolean;
}

/** Resolved alert policy (domain/alert-policy.ts); present only when a Prometheus or an Alertmanager URL is set. */
export interface AlertPolicy {
  /** Prometheus-compatible API base (http or https, no credentials); unset = no alert gate. */
  prometheusUrl?: string;
  /** Sent as `Authorization: Bearer` to Prometheus and Alertmanager. */
  tokenSecret?: ObjectKeyRef;
  /** PEM CA bundle trusted for both URLs (else the system's). */
  ca?: ObjectKeyRef;
  /** Only alerts whose `name{labels}` text matches hold (checked by domain/alert-gate.ts). */
  filter?: string;
  /** Pending alerts do not hold (default true). */
  firingOnly: boolean;
  /** Alert names that never hold. */
  ignore: string[];
  /** Held longer than this at one step: the upgrade fails. */
  holdTimeoutMs: number;
  /** Label naming the cluster an alert is about (`<namespace>/<name>`); alerts about another cluster never hold. */
  clusterLabel: string;
  /** Alertmanager API base; set = a silence while each control-plane and workers step runs. */
  alertmanagerUrl?: string;
  /** Extra matchers of the silence (the cluster matcher is always added). */
  silenceMatchers: SilenceMatcher[];
  /** The silence ends at most this long after it is created. */
  silenceDurationMs: number;
}

/** What the gate's activity found. Deterministic text only: it reaches CAPI's conditions. */
export type AlertReport =
  | {
      reachable: true;
      /** Names of the alerts that hold, sorted, without repeats (at most ALERT_NAMES_KEPT). */
      firing: string[];
      /** How many distinct names hold in all. */
      firingCount: number;
    }
  | { reachable: false; cause: string };

export const ALERT_NAMES_KEPT = 20;

export interface AlertSilenceInput {
  cluster: { namespace: string; name: string };
  policy: AlertPolicy;
  /** Names the silence: the same comment is the same silence (a retried activity finds it). */
  comment: string;
}

/** The `status` query's view of the alert gate and the open silence. */
export interface AlertGateStatus {
  /** While the gate holds: which step, since when, and what it says. */
  held?: { step: string; since: string; message: string; firing: string[]; unreachable?: string };
  /** The silence open for the running step. */
  silence?: { step: string; comment: string; id?: string };
}

// The alert gate's activities (alerts.ts): Prometheus's alerts and Alertmanager silences.
import type { AlertPolicy, AlertReport, AlertSilenceInput } from '../model/alerts.ts';

export interface AlertCheckInput {
  cluster: { namespace: string; name: string };
  policy: AlertPolicy;
}

export interface AlertActivities {
  /** The alerts that hold this cluster's upgrade now; an unreadable source is a report, not an error. */
  checkAlerts(input: AlertCheckInput): Promise<AlertReport>;
  /** The step's silence, created once (found again by its comment); its id. */
  ensureSilence(input: AlertSilenceInput): Promise<{ id: string }>;
  /** Expires every active silence of ours with this comment; how many it expired. */
  expireSilences(input: AlertSilenceInput): Promise<{ expired: number }>;
}

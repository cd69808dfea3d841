// A readiness run's state: the checks answered so far, which the `status` query
// shows while the run works and the run returns as its report.
import {
  READINESS_CHECKS,
  SURVEY_GATE_CHECKS,
  readinessReport,
  unknownCheck,
  type ReadinessCheck,
  type ReadinessCheckName,
  type ReadinessReport,
} from '../../domain/readiness.ts';
import { withGateOverrides } from '../../domain/readiness-gates.ts';
import type { GateOverride } from '../../domain/gate-overrides.ts';
import type { ReadinessInput } from '../../model/readiness.ts';

export class ReadinessState {
  readonly input: ReadinessInput;
  fromVersion: string | undefined;
  /**
   * The workload survey has answered (or failed): the gate checks it did not answer are left out
   * (a survey from before them), not shown as still running.
   */
  surveyed = false;
  /** The policy's gate overrides: the report says what the gates will do under them. */
  overrides: GateOverride | undefined;
  private readonly checks = new Map<ReadinessCheckName, ReadinessCheck>();

  constructor(input: ReadinessInput) {
    this.input = input;
  }

  add(check: ReadinessCheck): void {
    this.checks.set(check.check, check);
  }

  /** Each of `names` not answered yet: Unknown, saying why. */
  unknown(names: readonly ReadinessCheckName[], message: string): void {
    for (const name of names) if (!this.checks.has(name)) this.add(unknownCheck(name, message));
  }

  /** Checks still running show as Unknown, so a report read mid-run is never Ready too early. */
  report(): ReadinessReport {
    const { cluster, targetVersion } = this.input;
    const gate = (name: ReadinessCheckName) => (SURVEY_GATE_CHECKS as readonly string[]).includes(name);
    const pending = READINESS_CHECKS.filter((name) => !this.checks.has(name) && !(this.surveyed && gate(name))).map(
      (name) => unknownCheck(name, 'not checked yet'),
    );
    return readinessReport(
      {
        cluster: `${cluster.namespace}/${cluster.name}`,
        ...(this.fromVersion ? { fromVersion: this.fromVersion } : {}),
        targetVersion,
      },
      [...withGateOverrides([...this.checks.values()], this.overrides), ...pending],
    );
  }
}

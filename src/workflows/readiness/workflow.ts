// A readiness check of an upgrade before it runs (`capi-upgrades readiness`):
// the plan, removed APIs, a drain simulation, version skew, cluster health and
// the calendar, read-only, each with a verdict. A short run, so that every
// check and what it read are in the Web UI; `status` shows the report so far.
// The checks are in steps.ts, the verdicts in domain/readiness.ts.
import { setHandler } from '@temporalio/workflow';
import type { ReadinessReport } from '../../domain/readiness.ts';
import type { ReadinessInput } from '../../model/readiness.ts';
import { readinessReportQuery } from '../messages.ts';
import { setVersioningBehavior } from '../versioning.ts';
import { ReadinessState } from './state.ts';
import { calendar, health, plan, policiesOf, readTarget, removedApis, surveyDrain } from './steps.ts';

export async function readinessWorkflow(input: ReadinessInput): Promise<ReadinessReport> {
  const s = new ReadinessState(input);
  setHandler(readinessReportQuery, () => s.report());
  const target = await readTarget(s);
  const policies = target ? policiesOf(s, target) : undefined;
  if (!target || !policies) return s.report();
  s.overrides = policies.upgrade.gateOverride;
  calendar(s, policies);
  // The workload reads at once: each is independent of the others.
  const [survey] = await Promise.all([surveyDrain(s, policies), health(s, policies)]);
  const effective = plan(s, target, policies, survey);
  if (effective) await removedApis(s, policies, effective);
  return s.report();
}

// Worker Versioning: a short read-only run; it finishes on the build it started on.
setVersioningBehavior('PINNED', readinessWorkflow);

// GenerateUpgradePlan: CAPI asks for the chain of versions (control plane
// and workers) from the current versions to the target. Pure and fast: no
// backend call, so it never waits on Temporal.
import { resolvePlanPolicy } from '../../../domain/plan-policy.ts';
import { generateUpgradePlan } from '../../../domain/upgrade-plan.ts';
import { HookFailure } from '../../hooks/errors.ts';
import type { HookImplementation } from '../../hooks/hook-route.ts';
import type { UpgradePlanHandlers } from './routes.ts';

const steps = (versions: readonly string[]) => versions.map((version) => ({ version }));

export const generateUpgradePlanHandler: HookImplementation<'GenerateUpgradePlan'> = async (request, ctx) => {
  const resolved = resolvePlanPolicy({ settings: ctx.settings, annotations: request.cluster.metadata.annotations });
  if (!resolved.ok) throw new HookFailure(resolved.message);
  const result = generateUpgradePlan(
    {
      fromControlPlane: request.fromControlPlaneKubernetesVersion,
      fromWorkers: request.fromWorkersKubernetesVersion,
      to: request.toKubernetesVersion,
    },
    resolved.policy,
  );
  if (!result.ok) throw new HookFailure(result.message);
  // Empty lists are left out, as CAPI's Go client would omit them.
  const { controlPlaneUpgrades, workersUpgrades } = result.plan;
  return {
    status: 'Success',
    ...(controlPlaneUpgrades.length > 0 ? { controlPlaneUpgrades: steps(controlPlaneUpgrades) } : {}),
    ...(workersUpgrades.length > 0 ? { workersUpgrades: steps(workersUpgrades) } : {}),
  };
};

export const upgradePlanHandlers: UpgradePlanHandlers = { GenerateUpgradePlan: generateUpgradePlanHandler };

// The request bounds agree with what the rest of the extension plans and keeps.
import { describe, expect, it } from '@jest/globals';
import { LIMITS } from '../../src/api/hooks/contract.ts';
import { MAX_PLAN_MINORS } from '../../src/domain/upgrade-plan.ts';
import { MAX_GATES_PER_UPGRADE, MAX_UPGRADE_STEPS } from '../../src/model/cluster-upgrade.ts';

describe('request bounds', () => {
  it('let through every plan GenerateUpgradePlan can answer, and size the gates one upgrade keeps from it', () => {
    expect(MAX_UPGRADE_STEPS).toBe(MAX_PLAN_MINORS);
    expect(LIMITS.upgradeSteps).toBe(MAX_UPGRADE_STEPS);
    // BeforeClusterUpgrade, AfterClusterUpgrade, and Before/After for each control-plane and workers step.
    expect(MAX_GATES_PER_UPGRADE).toBe(2 + 2 * MAX_UPGRADE_STEPS + 2 * MAX_UPGRADE_STEPS);
  });
});

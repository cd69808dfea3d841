// GenerateUpgradePlan bound to its route; the handler is generate-upgrade-plan.ts.
import { hooksOf, type HookOf } from '../../../model/hooks.ts';
import { familyRoutes, type FamilyHandlers } from '../../hooks/family-routes.ts';

export type UpgradePlanHandlers = FamilyHandlers<HookOf<'upgrade-plan'>>;

export const upgradePlanRoutes = familyRoutes(hooksOf('upgrade-plan'));

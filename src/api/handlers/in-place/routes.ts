// In-place hooks: CanUpdateMachine, CanUpdateMachineSet, UpdateMachine. What each one does is
// decided by the handlers passed in; this file only binds them to their routes.
import { inPlaceHooks, type InPlaceHook } from '../../../model/hooks.ts';
import { familyRoutes, type FamilyHandlers } from '../../hooks/family-routes.ts';

export type InPlaceHandlers = FamilyHandlers<InPlaceHook>;

export const inPlaceRoutes = familyRoutes(inPlaceHooks);

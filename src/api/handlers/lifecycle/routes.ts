// Lifecycle hooks: BeforeClusterCreate … BeforeClusterDelete. What each one
// does is decided by the handlers passed in (the cluster upgrade workflow
// client); this file only binds them to their routes.
import { lifecycleHooks, type LifecycleHook } from '../../../model/hooks.ts';
import { familyRoutes, type FamilyHandlers } from '../../hooks/family-routes.ts';

export type LifecycleHandlers = FamilyHandlers<LifecycleHook>;

export const lifecycleRoutes = familyRoutes(lifecycleHooks);

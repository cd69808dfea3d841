// The Runtime SDK hooks this extension serves, by name, with what the process
// configuration needs of each: its family (which body limit applies) and its
// default failure policy. The wire schemas built on these names are
// api/contract.ts; config and api both read the names from here.

export type HookFamily = 'lifecycle' | 'upgrade-plan' | 'in-place';
export type FailurePolicy = 'Fail' | 'Ignore';

// Failure policies: hooks that only record (create, CP initialized) must not
// hold a cluster back when we are down; everything that gates an upgrade or
// answers for in-place changes fails closed.
export const hookDefaults = {
  BeforeClusterCreate: { family: 'lifecycle', defaultFailurePolicy: 'Ignore' },
  AfterControlPlaneInitialized: { family: 'lifecycle', defaultFailurePolicy: 'Ignore' },
  BeforeClusterUpgrade: { family: 'lifecycle', defaultFailurePolicy: 'Fail', upgradeGate: true },
  BeforeControlPlaneUpgrade: { family: 'lifecycle', defaultFailurePolicy: 'Fail', upgradeGate: true },
  AfterControlPlaneUpgrade: { family: 'lifecycle', defaultFailurePolicy: 'Fail', upgradeGate: true },
  BeforeWorkersUpgrade: { family: 'lifecycle', defaultFailurePolicy: 'Fail', upgradeGate: true },
  AfterWorkersUpgrade: { family: 'lifecycle', defaultFailurePolicy: 'Fail', upgradeGate: true },
  AfterClusterUpgrade: { family: 'lifecycle', defaultFailurePolicy: 'Fail', upgradeGate: true },
  BeforeClusterDelete: { family: 'lifecycle', defaultFailurePolicy: 'Fail' },
  GenerateUpgradePlan: { family: 'upgrade-plan', defaultFailurePolicy: 'Fail' },
  CanUpdateMachine: { family: 'in-place', defaultFailurePolicy: 'Fail' },
  CanUpdateMachineSet: { family: 'in-place', defaultFailurePolicy: 'Fail' },
  UpdateMachine: { family: 'in-place', defaultFailurePolicy: 'Fail' },
} as const satisfies Record<string, { family: HookFamily; defaultFailurePolicy: FailurePolicy; upgradeGate?: true }>;

export type HookName = keyof typeof hookDefaults;
export const hookNames = Object.keys(hookDefaults) as HookName[];

type HooksWhere<P> = { [H in HookName]: (typeof hookDefaults)[H] extends P ? H : never }[HookName];
/** The hooks of one family, in the order of hookDefaults. */
export type HookOf<F extends HookFamily> = HooksWhere<{ family: F }>;
export function hooksOf<F extends HookFamily>(family: F): readonly HookOf<F>[] {
  return hookNames.filter((h): h is HookOf<F> => hookDefaults[h].family === family);
}
/** BeforeClusterCreate … BeforeClusterDelete, in the order CAPI calls them. */
export type LifecycleHook = HookOf<'lifecycle'>;
export const lifecycleHooks = hooksOf('lifecycle');
/** CanUpdateMachine, CanUpdateMachineSet, UpdateMachine. */
export type InPlaceHook = HookOf<'in-place'>;
export const inPlaceHooks = hooksOf('in-place');
/** The lifecycle hooks an upgrade workflow gates, in the order CAPI calls them. */
export type UpgradeHook = HooksWhere<{ upgradeGate: true }>;
export const upgradeHooks: readonly UpgradeHook[] = hookNames.filter(
  (h): h is UpgradeHook => 'upgradeGate' in hookDefaults[h],
);

/** `BeforeClusterUpgrade` → `before-cluster-upgrade`: the default handler name (as CAPI's test extension names them). */
export function defaultHandlerName(hookName: HookName): string {
  return hookName.replace(/([a-z])([A-Z])/g, '$1-$2').toLowerCase();
}

// A stand-in for a bug in workflow code: the type the api starts throws a
// plain Error, which fails the workflow task (not the run), as a TypeError in
// real workflow code would. Bundled by the test that needs it.
export async function clusterUpgradeWorkflow(): Promise<never> {
  throw new TypeError('simulated bug in workflow code');
}

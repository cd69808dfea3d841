// How many machines of a MachineDeployment may be unavailable at once, from its
// rollingUpdate.maxUnavailable (an int or a percentage of replicas, rounded
// down as Kubernetes does for maxUnavailable). Pure.

/**
 * The number `maxUnavailable` allows for `replicas` machines; at least 1, because an in-place
 * update takes its own machine out (CAPI updates workers in place only with maxUnavailable ≥ 1).
 */
export function allowedUnavailable(maxUnavailable: number | string | undefined, replicas: number): number {
  let n = 0;
  if (typeof maxUnavailable === 'number' && Number.isInteger(maxUnavailable)) n = maxUnavailable;
  else if (typeof maxUnavailable === 'string') {
    const percent = /^(\d+)%$/.exec(maxUnavailable.trim());
    if (percent) n = Math.floor((Number(percent[1]) * replicas) / 100);
    else if (/^\d+$/.test(maxUnavailable.trim())) n = Number(maxUnavailable.trim());
  }
  return Math.max(1, n);
}

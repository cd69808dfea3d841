#!/usr/bin/env bash
# Kubernetes test bed: two kwokctl clusters (binary runtime, loopback only) built
# from the binaries that scripts/tools-k8s.sh provides.
#
#   scripts/testbed.sh up <statedir>     create both clusters, write <statedir>/testbed.json
#   scripts/testbed.sh down <statedir>   delete them (safe to repeat, and after a partial up)
#   scripts/testbed.sh stop <statedir>   stop their processes, keeping etcd's data (`make dev`)
#   scripts/testbed.sh start <statedir>  start a stopped test bed again with the data it held
#
#   management cluster  capi-uo-mgmt-<suffix>: etcd, kube-apiserver,
#                       kube-controller-manager; Cluster API and NodeUpgradeRequest CRDs installed; Secret
#                       <clusterName>-kubeconfig (key "value") for the workload cluster
#   workload cluster    capi-uo-wl-<suffix>: + kube-scheduler and the kwok controller,
#                       which manages every Node (no annotation needed) and its pods
#
# Environment (all optional):
#   TESTBED_SUFFIX        cluster name suffix (default: random 6 hex digits)
#   TESTBED_CLUSTER_NAME  Cluster API name of the workload cluster (default: workload)
#   TESTBED_NAMESPACE     namespace of the kubeconfig Secret (default: default)
#   TESTBED_TIMEOUT       kwokctl create timeout (default: 180s)
#   TESTBED_MANAGEMENT_ONLY=1  only the management cluster with the CRDs (no workload
#                         cluster, RBAC or kubeconfig Secret): a bare management cluster
#                         for tests that install the extension themselves (clusterctl);
#                         testbed.json then has managementKubeconfig, kubectl and capiVersion
# kwokctl state (pki, etcd data, logs, pids) lives in <statedir>/kwok (KWOK_WORKDIR),
# never in ~/.kwok; ~/.kube is not touched. kwokctl logs: <statedir>/kwokctl-*.log.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

log() { printf '[testbed] %s\n' "$*" >&2; }
die() { printf '[testbed] error: %s\n' "$*" >&2; exit 1; }

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}" >&2; exit 2; }

[ $# -eq 2 ] || usage
cmd="$1"
case "$cmd" in
  up) mkdir -p "$2" ;;
  down|stop) [ -d "$2" ] || { log "nothing to $cmd in $2"; exit 0; } ;;
  start) [ -f "$2/testbed.json" ] || die "no test bed in $2 to start: run up first" ;;
  *) usage ;;
esac
STATE="$(cd "$2" && pwd)"
export KWOK_WORKDIR="$STATE/kwok"
# kubectl's discovery cache: keep it with the state instead of ~/.kube/cache.
export KUBECACHEDIR="$STATE/kube-cache"

json_str() { # JSON string literal
  local s="$1"
  s="${s//\\/\\\\}"; s="${s//\"/\\\"}"; s="${s//$'\n'/\\n}"; s="${s//$'\t'/\\t}"
  printf '"%s"' "$s"
}

# Processes of this test bed still running: every component gets paths under
# $KWOK_WORKDIR/clusters/ on its command line (certs, data dir, kubeconfig), so the
# match is exact to this state dir; only the component binaries are considered.
leftover_pids() {
  local pid exe candidates
  if command -v pgrep >/dev/null 2>&1; then
    candidates="$(pgrep -f -- "$KWOK_WORKDIR/clusters/" || true)"
  else
    candidates="$(cd /proc && printf '%s\n' [0-9]*)"
  fi
  for pid in $candidates; do
    exe="$(readlink "/proc/$pid/exe" 2>/dev/null)" || continue
    case "${exe##*/}" in
      etcd|kube-apiserver|kube-controller-manager|kube-scheduler|kwok|kubectl) ;;
      *) continue ;;
    esac
    if tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF "$KWOK_WORKDIR/clusters/"; then
      echo "$pid"
    fi
  done
}

down() {
  local kwokctl="" names=() n d pids
  if [ -f "$STATE/state.env" ]; then
    # shellcheck disable=SC1091
    . "$STATE/state.env"
    kwokctl="${TESTBED_KWOKCTL:-}"
  fi
  for d in "$KWOK_WORKDIR"/clusters/*/; do
    [ -d "$d" ] && names+=("$(basename "$d")")
  done
  if [ ${#names[@]} -gt 0 ]; then
    if [ -z "$kwokctl" ] || [ ! -x "$kwokctl" ]; then
      kwokctl="$(command -v kwokctl || true)"
    fi
    for n in "${names[@]}"; do
      if [ -n "$kwokctl" ]; then
        log "deleting cluster $n"
        "$kwokctl" delete cluster --name "$n" --kubeconfig "$STATE/kwokctl-contexts.kubeconfig" \
          >>"$STATE/kwokctl-delete.log" 2>&1 ||
          log "kwokctl delete cluster $n failed (see $STATE/kwokctl-delete.log); killing its processes"
      fi
    done
  fi
  # Whatever kwokctl could not stop (partial up, kwokctl missing): TERM, then KILL
  # (kube-apiserver and etcd take several seconds to stop on TERM).
  pids="$(leftover_pids | tr '\n' ' ')"
  if [ -n "$pids" ]; then
    log "stopping leftover processes: $pids"
    # shellcheck disable=SC2086 # a list of pids
    kill $pids 2>/dev/null || true
    for _ in $(seq 1 20); do # 2s, then KILL: the state is thrown away anyway
      pids="$(leftover_pids | tr '\n' ' ')"
      [ -z "$pids" ] && break
      sleep 0.1
    done
    # shellcheck disable=SC2086 # a list of pids
    [ -z "$pids" ] || kill -9 $pids 2>/dev/null || true
  fi
  rm -rf "$KWOK_WORKDIR" "$KUBECACHEDIR" "$STATE/testbed.json" "$STATE/state.env" \
    "$STATE/management.kubeconfig" "$STATE/workload.kubeconfig" "$STATE/kwokctl-config.yaml" \
    "$STATE/worker.kubeconfig" "$STATE/api.kubeconfig" "$STATE/workload-scoped.kubeconfig" \
    "$STATE/kwokctl-contexts.kubeconfig"
}

# Fails when a process of the test bed listens on a non-loopback address.
check_loopback() {
  command -v ss >/dev/null 2>&1 || { log "ss not found: loopback check skipped"; return 0; }
  local pid bad=""
  for pid in $(leftover_pids); do
    bad+="$(ss -Hltnp 2>/dev/null | grep "pid=$pid," | awk '{print $4}' |
      grep -Ev '^(127\.0\.0\.1|\[::1\]):' | tr '\n' ' ' || true)"
  done
  [ -z "$bad" ] || die "test bed listens on non-loopback addresses: $bad"
}

# scoped_kubeconfig ADMIN_KUBECONFIG NAMESPACE SERVICEACCOUNT OUT: a kubeconfig for the
# same server that authenticates with a token of that ServiceAccount (valid 48 h).
scoped_kubeconfig() {
  local admin="$1" ns="$2" sa="$3" out="$4" token
  token="$("$KUBECTL" --kubeconfig "$admin" create token "$sa" -n "$ns" --duration 48h)"
  "$KUBECTL" config view --raw --flatten --minify --kubeconfig "$admin" >"$out.tmp"
  "$KUBECTL" --kubeconfig "$out.tmp" config set-credentials "$sa" --token "$token" >/dev/null
  "$KUBECTL" --kubeconfig "$out.tmp" config set-context --current --user "$sa" >/dev/null
  # Drop the admin user the minified copy carried.
  "$KUBECTL" config view --raw --flatten --minify --kubeconfig "$out.tmp" >"$out"
  rm -f "$out.tmp"
  chmod 600 "$out"
}

# shellcheck disable=SC2153 # KWOKCTL comes from tools-k8s.sh (eval in up)
create_cluster() { # name, extra kwokctl args...
  local name="$1" log="$STATE/kwokctl-create-$1.log" t
  shift
  t=$(date +%s)
  # --kubeconfig: kwokctl would otherwise add a context to ~/.kube/config.
  if ! "$KWOKCTL" create cluster --name "$name" --runtime binary \
      --config "$STATE/kwokctl-config.yaml" --kubeconfig "$STATE/kwokctl-contexts.kubeconfig" \
      --timeout "${TESTBED_TIMEOUT:-180s}" --wait 60s "$@" >"$log" 2>&1 8>&- ||
    grep -q '"level":"ERROR"' "$log"; then
    # kwokctl exits 0 even when the cluster never became ready: check its log too.
    tail -n 5 "$log" >&2
    die "kwokctl create cluster $name failed (log: $log, component logs: $KWOK_WORKDIR/clusters/$name/logs)"
  fi
  log "cluster $name ready in $(( $(date +%s) - t ))s"
}

up() {
  local start suffix mgmt wl cluster ns t
  start=$(date +%s)
  if [ -f "$STATE/state.env" ] || [ -d "$KWOK_WORKDIR/clusters" ]; then
    log "state found in $STATE: tearing the previous test bed down first"
    down
  fi
  rm -f "$STATE"/kwokctl-*.log

  local envs
  envs="$("$ROOT/scripts/tools-k8s.sh")"
  eval "$envs"
  [ -x "${KWOKCTL:-}" ] || die "kwokctl not available"
  # kwokctl runs `kubectl` from PATH (falls back to KWOK_KUBECTL_BINARY): use ours.
  PATH="$(dirname "$KUBECTL"):$PATH"
  export PATH

  suffix="${TESTBED_SUFFIX:-$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')}"
  mgmt="capi-uo-mgmt-$suffix"
  wl="capi-uo-wl-$suffix"
  cluster="${TESTBED_CLUSTER_NAME:-workload}"
  ns="${TESTBED_NAMESPACE:-default}"

  # Recorded before anything starts, so `down` can clean up a partial `up`.
  {
    echo "TESTBED_KWOKCTL=$(printf '%q' "$KWOKCTL")"
    echo "TESTBED_MGMT=$mgmt"
    echo "TESTBED_WL=$wl"
  } >"$STATE/state.env"
  # Any failure from here on (including die and Ctrl-C) tears down what was started.
  # shellcheck disable=SC2154 # rc is assigned inside the trap
  trap 'rc=$?; trap - EXIT; if [ "$rc" -ne 0 ]; then log "up failed: cleaning up"; down; fi; exit "$rc"' EXIT
  trap 'exit 130' INT TERM

  # kwokctl config: loopback bind address + stages. Giving any Stage replaces all
  # of kwokctl's defaults, so kwok's own node/pod stages are listed explicitly;
  # pod-delete (honours the deletion grace period) and pod-fail (Job pods of image
  # testbed.invalid/fails fail) are ours.
  {
    sed "s#__ROOT__#$ROOT#g" "$ROOT/test/testbed/kwokctl.yaml"
    for f in node/fast/node-initialize node/heartbeat-with-lease/node-heartbeat-with-lease \
        pod/fast/pod-ready pod/fast/pod-complete; do
      printf -- '---\n'
      cat "$KWOK_STAGES_DIR/$f.yaml"
    done
    printf -- '---\n'
    cat "$ROOT/test/testbed/kwok-pod-delete-stage.yaml"
    printf -- '---\n'
    cat "$ROOT/test/testbed/kwok-pod-fail-stage.yaml"
    # `kubectl logs` of any container named "upgrade" (the node upgrade Job's) serves this file.
    cat <<EOF
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: ClusterLogs
metadata:
  name: upgrade-job-logs
spec:
  logs:
    - containers: [upgrade]
      logsFile: $ROOT/test/testbed/upgrade-job-pod-log.txt
EOF
  } >"$STATE/kwokctl-config.yaml"

  # kwokctl picks ports by probing downwards from 32767 and only knows the clusters
  # in its own KWOK_WORKDIR: create one cluster at a time, and hold a lock shared by
  # all test beds on this machine so concurrent `up`s do not pick the same ports.
  local lock="${CAPI_UO_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/capi-upgrade-orchestrator}/testbed-create.lock"
  mkdir -p "$(dirname "$lock")"
  if command -v flock >/dev/null 2>&1; then
    exec 8>"$lock"
    flock 8
  fi
  log "creating clusters $mgmt${TESTBED_MANAGEMENT_ONLY:+ (management only)}${TESTBED_MANAGEMENT_ONLY:- and $wl} (logs: $STATE/kwokctl-create-*.log)"
  # Management: no nodes or pods, so no scheduler and no kwok controller.
  create_cluster "$mgmt" --disable kube-scheduler,kwok-controller
  # networking.k8s.io/v1beta1 (IPAddress, ServiceCIDR: deprecated in 1.34, removed in 1.37) is
  # the beta API of v1.36 whose requests show in apiserver_requested_deprecated_apis with a
  # removal release (test/integration/deprecated-apis.test.ts); v1.36 serves none by default.
  [ -n "${TESTBED_MANAGEMENT_ONLY:-}" ] || create_cluster "$wl" --kube-runtime-config networking.k8s.io/v1beta1=true
  exec 8>&- # (the kwokctl-started daemons never inherit fd 8, see create_cluster)

  # Self-contained kubeconfigs (certificates inlined).
  "$KUBECTL" config view --raw --flatten --minify \
    --kubeconfig "$KWOK_WORKDIR/clusters/$mgmt/kubeconfig.yaml" >"$STATE/management.kubeconfig"
  chmod 600 "$STATE/management.kubeconfig"
  if [ -z "${TESTBED_MANAGEMENT_ONLY:-}" ]; then
    "$KUBECTL" config view --raw --flatten --minify \
      --kubeconfig "$KWOK_WORKDIR/clusters/$wl/kubeconfig.yaml" >"$STATE/workload.kubeconfig"
    chmod 600 "$STATE/workload.kubeconfig"
  fi
  local km=("$KUBECTL" --kubeconfig "$STATE/management.kubeconfig")

  check_loopback

  t=$(date +%s)
  # (and our NodeUpgradeRequest CRD, as config/default installs it for the management executor)
  "${km[@]}" apply --server-side --force-conflicts -f "$CAPI_CRDS_DIR" -f "$DEPLOY_CRDS_DIR" \
    -f "$ROOT/config/crd/nodeupgraderequests.yaml" >/dev/null
  "${km[@]}" wait --for condition=Established --timeout 60s crd --all >/dev/null
  # Established is not served: until a CRD's storage is up, lists answer 429 "storage is
  # (re)initializing", which a first test would meet.
  local r
  for r in clusters machines machinedeployments; do
    for _ in $(seq 1 120); do
      "${km[@]}" get --raw "/apis/cluster.x-k8s.io/v1beta2/$r?limit=1" >/dev/null 2>&1 && break
      sleep 0.5
    done
  done
  log "Cluster API $CAPI_VERSION, cert-manager and ServiceMonitor CRDs established in $(( $(date +%s) - t ))s"

  if [ -n "${TESTBED_MANAGEMENT_ONLY:-}" ]; then
    cat >"$STATE/testbed.json.tmp" <<EOF
{
  "managementKubeconfig": $(json_str "$STATE/management.kubeconfig"),
  "kubectl": $(json_str "$KUBECTL"),
  "capiVersion": $(json_str "$CAPI_VERSION")
}
EOF
    mv "$STATE/testbed.json.tmp" "$STATE/testbed.json"
    trap - EXIT INT TERM
    log "management-only test bed up in $(( $(date +%s) - start ))s: $STATE/testbed.json"
    return 0
  fi

  # The extension's least-privilege identities (config/rbac, config/workload): the
  # integration tier runs the activities with these tokens, never as admin.
  t=$(date +%s)
  local kw=("$KUBECTL" --kubeconfig "$STATE/workload.kubeconfig") sa_ns=capi-upgrade-orchestrator-system
  "${km[@]}" create namespace "$sa_ns" --dry-run=client -o yaml | "${km[@]}" apply -f - >/dev/null
  "${km[@]}" apply -n "$sa_ns" -k "$ROOT/config/rbac" >/dev/null
  "${kw[@]}" apply -k "$ROOT/config/workload" >/dev/null
  scoped_kubeconfig "$STATE/management.kubeconfig" "$sa_ns" capi-upgrade-orchestrator-worker "$STATE/worker.kubeconfig"
  scoped_kubeconfig "$STATE/management.kubeconfig" "$sa_ns" capi-upgrade-orchestrator-api "$STATE/api.kubeconfig"
  scoped_kubeconfig "$STATE/workload.kubeconfig" kube-system capi-upgrade-orchestrator "$STATE/workload-scoped.kubeconfig"
  log "ServiceAccount kubeconfigs (worker, api, workload) ready in $(( $(date +%s) - t ))s"

  if [ "$ns" != default ]; then
    "${km[@]}" create namespace "$ns" --dry-run=client -o yaml | "${km[@]}" apply -f - >/dev/null
  fi
  # Secret as Cluster API writes it: <cluster>-kubeconfig, key "value".
  "${km[@]}" create secret generic "$cluster-kubeconfig" -n "$ns" \
    --type cluster.x-k8s.io/secret --from-file "value=$STATE/workload-scoped.kubeconfig" \
    --dry-run=client -o yaml |
    "${km[@]}" label --local -f - "cluster.x-k8s.io/cluster-name=$cluster" -o yaml |
    "${km[@]}" apply -f - >/dev/null

  local mserver wserver
  mserver="$("${km[@]}" config view -o jsonpath='{.clusters[0].cluster.server}')"
  wserver="$("$KUBECTL" --kubeconfig "$STATE/workload.kubeconfig" config view -o jsonpath='{.clusters[0].cluster.server}')"

  cat >"$STATE/testbed.json.tmp" <<EOF
{
  "managementKubeconfig": $(json_str "$STATE/management.kubeconfig"),
  "workloadKubeconfig": $(json_str "$STATE/workload.kubeconfig"),
  "workerKubeconfig": $(json_str "$STATE/worker.kubeconfig"),
  "apiKubeconfig": $(json_str "$STATE/api.kubeconfig"),
  "workloadScopedKubeconfig": $(json_str "$STATE/workload-scoped.kubeconfig"),
  "managementAuditLog": $(json_str "$KWOK_WORKDIR/clusters/$mgmt/logs/audit.log"),
  "workloadAuditLog": $(json_str "$KWOK_WORKDIR/clusters/$wl/logs/audit.log"),
  "clusterName": $(json_str "$cluster"),
  "namespace": $(json_str "$ns"),
  "kubeconfigSecretName": $(json_str "$cluster-kubeconfig"),
  "managementServer": $(json_str "$mserver"),
  "workloadServer": $(json_str "$wserver"),
  "managementKwokCluster": $(json_str "$mgmt"),
  "workloadKwokCluster": $(json_str "$wl"),
  "kwokWorkdir": $(json_str "$KWOK_WORKDIR"),
  "kubectl": $(json_str "$KUBECTL"),
  "kubeVersion": $(json_str "$KUBE_VERSION"),
  "capiVersion": $(json_str "$CAPI_VERSION"),
  "capiCrdsDir": $(json_str "$CAPI_CRDS_DIR"),
  "podDeleteDelayAnnotation": "pod-delete.stage.kwok.x-k8s.io/delay"
}
EOF
  mv "$STATE/testbed.json.tmp" "$STATE/testbed.json"
  trap - EXIT INT TERM
  log "test bed up in $(( $(date +%s) - start ))s: $STATE/testbed.json"
}

# kwokctl stop/start for every cluster of this state dir: the processes go, etcd's data stays.
stop_or_start() { # stop|start
  local n d kwokctl
  # shellcheck disable=SC1091
  . "$STATE/state.env"
  kwokctl="${TESTBED_KWOKCTL:-}"
  [ -x "$kwokctl" ] || die "kwokctl ($kwokctl) not found: the tool cache changed; run down, then up"
  for d in "$KWOK_WORKDIR"/clusters/*/; do
    [ -d "$d" ] || continue
    n="$(basename "$d")"
    if ! "$kwokctl" "$1" cluster --name "$n" >>"$STATE/kwokctl-$1.log" 2>&1; then
      log "kwokctl $1 cluster $n failed (log: $STATE/kwokctl-$1.log)"
      return 1
    fi
  done
}

case "$cmd" in
  up) up ;;
  down) down; log "test bed in $STATE is down" ;;
  stop)
    rc=0
    if [ -f "$STATE/state.env" ]; then stop_or_start stop || rc=$?; fi
    # Whatever kwokctl left (or all of it, when it failed): etcd's data is on disk either way.
    pids="$(leftover_pids | tr '\n' ' ')"
    # shellcheck disable=SC2086
    [ -z "$pids" ] || kill $pids 2>/dev/null || true
    log "test bed in $STATE is stopped (its data is kept)"
    exit "$rc"
    ;;
  start)
    start=$(date +%s)
    stop_or_start start || die "the test bed in $STATE could not be started again"
    KUBECTL="$(node -e 'process.stdout.write(JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")).kubectl)' "$STATE/testbed.json")"
    for _ in $(seq 1 120); do
      "$KUBECTL" --kubeconfig "$STATE/management.kubeconfig" get --raw /readyz >/dev/null 2>&1 && break
      sleep 0.5
    done
    "$KUBECTL" --kubeconfig "$STATE/management.kubeconfig" get --raw /readyz >/dev/null ||
      die "the management cluster's API server is not ready after start (logs: $KWOK_WORKDIR/clusters/*/logs)"
    log "test bed in $STATE started again in $(( $(date +%s) - start ))s"
    ;;
  *) usage ;;
esac

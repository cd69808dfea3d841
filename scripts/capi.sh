#!/usr/bin/env bash
# Real Cluster API controllers against the test bed's management cluster: core
# CAPI, the kubeadm bootstrap (CABPK) and control-plane (KCP) providers and the
# Docker provider (CAPD) with its in-memory backend, as local processes on loopback.
#
#   scripts/capi.sh up <testbed-state-dir> <capi-state-dir>
#       build the managers if needed (scripts/tools-capi.sh), make one CA and a
#       serving certificate for 127.0.0.1, install every provider's CRDs (contract
#       labels, conversion webhooks by url) and admission webhooks by url, start
#       the four managers, wait for their webhooks, write <capi-state-dir>/capi.json
#   scripts/capi.sh down <capi-state-dir>
#       stop the managers (safe to repeat, and after a partial up); when the
#       management cluster is still there, remove the webhook configurations so it
#       is not left with webhooks nobody serves
#   scripts/capi.sh register-extension <capi-state-dir> <name> <https-url> <ca-pem-file> [key=value ...]
#       create/update the ExtensionConfig <name> (runtime.cluster.x-k8s.io/v1beta2)
#       calling <https-url> with caBundle from <ca-pem-file>, optional settings,
#       and wait until CAPI has discovered it (prints the handler names)
#
# Run `scripts/testbed.sh up <testbed-state-dir>` first. Node (>= 24, for the
# manifest renderer) must be on PATH: `source scripts/env.sh --testbed`.
# Environment (optional): CAPI_LOG_VERBOSITY (manager -v, default 2),
# CAPI_UP_TIMEOUT (seconds to wait for the managers, default 180),
# CAPI_EXTENSION_CLIENT_CERT_DIR (a directory with capi/tls.{crt,key} and kcp/tls.{crt,key}:
# core CAPI and KCP present these client certificates to Runtime Extensions, with
# --runtime-extension-client-cert-file / --runtime-extension-client-key-file).
# State dir: certs/ (ca.crt, tls.crt, tls.key), providers.yaml (what was applied),
# logs/<manager>.log, pids/<manager>.pid, state.env, capi.json.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

log() { printf '[capi] %s\n' "$*" >&2; }
die() { printf '[capi] error: %s\n' "$*" >&2; exit 1; }
usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}" >&2; exit 2; }

MANAGERS=(capi cabpk kcp capd)
# Feature gates per manager: topology + Runtime SDK on core (ClusterClass
# topology is what calls the lifecycle hooks), in-place updates on core, KCP
# and CABPK (the in-place update hooks).
declare -A GATES=(
  [capi]="ClusterTopology=true,RuntimeSDK=true,InPlaceUpdates=true"
  [cabpk]="InPlaceUpdates=true"
  [kcp]="ClusterTopology=true,InPlaceUpdates=true"
  [capd]="ClusterTopology=true"
)
# Labels the providers' kustomize configs put on their CRDs. The contract labels
# (cluster.x-k8s.io/<contract>: <api versions>) are how core CAPI finds which API
# version of a provider's kinds implements a contract; core's own CRDs have none.
declare -A PROVIDER_LABEL=([capi]=cluster-api [cabpk]=bootstrap-kubeadm [kcp]=control-plane-kubeadm [capd]=infrastructure-docker)
declare -A PREFIX=([capi]=capi- [cabpk]=capi-kubeadm-bootstrap- [kcp]=capi-kubeadm-control-plane- [capd]=capd-)

json_str() {
  local s="$1"
  s="${s//\\/\\\\}"; s="${s//\"/\\\"}"; s="${s//$'\n'/\\n}"; s="${s//$'\t'/\\t}"
  printf '"%s"' "$s"
}

# json_get FILE KEY: a top-level string field of a JSON file.
json_get() {
  node -e 'const v = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"))[process.argv[2]];
    if (typeof v !== "string") process.exit(1); process.stdout.write(v);' "$1" "$2" ||
    die "$1 has no string field $2"
}

# Is PID one of our managers for this state dir? (pids can be reused after a crash.)
is_ours() {
  local pid="$1" exe
  exe="$(readlink "/proc/$pid/exe" 2>/dev/null)" || return 1
  case "${exe##*/}" in capi-manager|cabpk-manager|kcp-manager|capd-manager) ;; *) return 1 ;; esac
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "--webhook-cert-dir=$STATE/certs"
}

stop_managers() {
  local m pid pids=()
  for m in "${MANAGERS[@]}"; do
    [ -f "$STATE/pids/$m.pid" ] || continue
    pid="$(cat "$STATE/pids/$m.pid")"
    if is_ours "$pid"; then
      kill "$pid" 2>/dev/null || true
      pids+=("$pid")
    fi
    rm -f "$STATE/pids/$m.pid"
  done
  [ ${#pids[@]} -gt 0 ] || return 0
  log "stopping managers: ${pids[*]}"
  for _ in $(seq 1 50); do # 5s for a graceful stop, then KILL: state is in the API server
    local alive=()
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive+=("$pid"); done
    [ ${#alive[@]} -eq 0 ] && return 0
    sleep 0.1
  done
  for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
}

down() {
  local kc="" kubectl=""
  if [ -f "$STATE/state.env" ]; then
    # shellcheck disable=SC1091
    . "$STATE/state.env"
    kc="${CAPI_STATE_KUBECONFIG:-}"
    kubectl="${CAPI_STATE_KUBECTL:-}"
  fi
  stop_managers
  # Webhooks nobody serves would make every write of a CAPI kind fail (failurePolicy
  # Fail) on a management cluster that lives on; best effort, the cluster may be gone.
  if [ -n "$kc" ] && [ -f "$kc" ] && [ -x "$kubectl" ]; then
    "$kubectl" --kubeconfig "$kc" --request-timeout 5s delete \
      validatingwebhookconfigurations,mutatingwebhookconfigurations \
      -l 'cluster.x-k8s.io/provider in (cluster-api,bootstrap-kubeadm,control-plane-kubeadm,infrastructure-docker)' \
      --ignore-not-found >/dev/null 2>&1 || true
  fi
  rm -rf "$STATE/pids" "$STATE/capi.json" "$STATE/state.env"
}

# free_ports N: N distinct free loopback ports, each left in TIME_WAIT so that no
# other process's bind to port 0 gets it before the manager binds it
# (src/local/free-ports.ts).
free_ports() {
  node "$ROOT/src/local/free-ports.ts" "$1"
}

make_certs() {
  local d="$STATE/certs"
  rm -rf "$d"
  mkdir -p "$d"
  # One CA for every manager's webhooks; the serving certificate names the only
  # address they are reached at. EC keys: fast to make, Go and kube accept them.
  openssl req -x509 -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -keyout "$d/ca.key" -out "$d/ca.crt" -days 30 -subj "/CN=capi-uo-test-webhook-ca" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
  openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -keyout "$d/tls.key" -out "$d/tls.csr" -subj "/CN=127.0.0.1" 2>/dev/null
  printf '%s\n' "subjectAltName=IP:127.0.0.1" "basicConstraints=critical,CA:FALSE" \
    "keyUsage=critical,digitalSignature" "extendedKeyUsage=serverAuth" >"$d/tls.ext"
  openssl x509 -req -in "$d/tls.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -CAcreateserial \
    -days 30 -extfile "$d/tls.ext" -out "$d/tls.crt" 2>/dev/null
  rm -f "$d/tls.csr" "$d/tls.ext" "$d/ca.srl"
  chmod 600 "$d/ca.key" "$d/tls.key"
}

up() {
  local tb="$1" start kc kubectl t m i
  start=$(date +%s)
  [ -f "$tb/testbed.json" ] || die "$tb/testbed.json not found: run scripts/testbed.sh up $tb first"
  command -v node >/dev/null 2>&1 || die "node not on PATH: source scripts/env.sh first"
  command -v openssl >/dev/null 2>&1 || die "openssl not on PATH (needed for the webhook certificates)"
  kc="$(json_get "$tb/testbed.json" managementKubeconfig)"
  kubectl="$(json_get "$tb/testbed.json" kubectl)"
  [ -f "$kc" ] || die "management kubeconfig $kc not found"
  local km=("$kubectl" --kubeconfig "$kc")

  if [ -f "$STATE/state.env" ] || [ -d "$STATE/pids" ]; then
    log "state found in $STATE: stopping the previous managers first"
    down
  fi

  eval "$("$ROOT/scripts/tools-capi.sh")"
  local -A BIN=([capi]="$CAPI_MANAGER_BINARY" [cabpk]="$CABPK_MANAGER_BINARY"
    [kcp]="$KCP_MANAGER_BINARY" [capd]="$CAPD_MANAGER_BINARY")
  # The core manager's config/ sits under core/ from v1.14, at the module root before.
  local core_src="$CAPI_MODULE_DIR/core"
  [ -d "$core_src/config" ] || core_src="$CAPI_MODULE_DIR"
  local -A SRC=([capi]="$core_src" [cabpk]="$CAPI_MODULE_DIR/bootstrap/kubeadm"
    [kcp]="$CAPI_MODULE_DIR/controlplane/kubeadm" [capd]="$CAPI_TEST_MODULE_DIR/infrastructure/docker")

  {
    echo "CAPI_STATE_KUBECONFIG=$(printf '%q' "$kc")"
    echo "CAPI_STATE_KUBECTL=$(printf '%q' "$kubectl")"
  } >"$STATE/state.env"
  # shellcheck disable=SC2154 # rc is assigned inside the trap
  trap 'rc=$?; trap - EXIT; if [ "$rc" -ne 0 ]; then log "up failed: stopping what was started (logs kept in $STATE/logs)"; down; fi; exit "$rc"' EXIT
  trap 'exit 130' INT TERM

  make_certs

  # Three ports per manager: webhooks (TLS), health probes and diagnostics (metrics, http).
  local -a ports
  read -r -a ports <<<"$(free_ports 12)"
  local -A WH=() HP=() DP=()
  i=0
  for m in "${MANAGERS[@]}"; do
    WH[$m]="${ports[$i]}"; HP[$m]="${ports[$((i + 1))]}"; DP[$m]="${ports[$((i + 2))]}"
    i=$((i + 3))
  done

  # Render the CRDs and webhook configurations (scripts/capi-render-providers.mjs).
  local cfg="$STATE/render.json" sep=""
  {
    printf '{"caFile": %s, "providers": [' "$(json_str "$STATE/certs/ca.crt")"
    for m in "${MANAGERS[@]}"; do
      local labels crds="" f
      labels="{\"cluster.x-k8s.io/provider\": \"${PROVIDER_LABEL[$m]}\""
      [ "$m" = capi ] || labels+=', "cluster.x-k8s.io/v1beta1": "v1beta1", "cluster.x-k8s.io/v1beta2": "v1beta2"'
      labels+="}"
      for f in "${SRC[$m]}"/config/crd/bases/*.yaml; do
        crds+="${crds:+, }$(json_str "$f")"
      done
      printf '%s{"name": "%s", "prefix": "%s", "port": %s, "labels": %s, "crdFiles": [%s], "webhookFile": %s}' \
        "$sep" "$m" "${PREFIX[$m]}" "${WH[$m]}" "$labels" "$crds" "$(json_str "${SRC[$m]}/config/webhook/manifests.yaml")"
      sep=", "
    done
    printf ']}\n'
  } >"$cfg"
  node "$ROOT/scripts/capi-render-providers.mjs" "$cfg" >"$STATE/providers.yaml"

  t=$(date +%s)
  "${km[@]}" apply --server-side --force-conflicts -f "$STATE/providers.yaml" >/dev/null
  "${km[@]}" wait --for condition=Established --timeout 60s crd \
    -l 'cluster.x-k8s.io/provider in (cluster-api,bootstrap-kubeadm,control-plane-kubeadm,infrastructure-docker)' >/dev/null
  log "CRDs and webhook configurations applied in $(( $(date +%s) - t ))s"

  mkdir -p "$STATE/logs" "$STATE/pids"
  t=$(date +%s)
  local client_dir="${CAPI_EXTENSION_CLIENT_CERT_DIR:-}"
  if [ -n "$client_dir" ]; then
    for m in capi kcp; do
      if [ ! -f "$client_dir/$m/tls.crt" ] || [ ! -f "$client_dir/$m/tls.key" ]; then
        die "CAPI_EXTENSION_CLIENT_CERT_DIR: $client_dir/$m/tls.crt and tls.key expected"
      fi
    done
  fi
  for m in "${MANAGERS[@]}"; do
    local envs=() client_args=()
    # The two managers that call Runtime Extensions (core: lifecycle hooks and
    # UpdateMachine; KCP: CanUpdateMachine) authenticate with a client certificate.
    if [ -n "$client_dir" ] && { [ "$m" = capi ] || [ "$m" = kcp ]; }; then
      client_args=("--runtime-extension-client-cert-file=$client_dir/$m/tls.crt"
        "--runtime-extension-client-key-file=$client_dir/$m/tls.key")
    fi
    # CAPD's in-memory backend serves each workload API server at POD_IP:<port> and
    # writes that address into the cluster's kubeconfig.
    [ "$m" = capd ] && envs=(POD_IP=127.0.0.1)
    # setsid: the managers outlive this script and ignore the caller's Ctrl-C;
    # `down` stops them by pid.
    env "${envs[@]}" setsid "${BIN[$m]}" \
      --kubeconfig="$kc" \
      --leader-elect=false \
      --webhook-port="${WH[$m]}" \
      --webhook-cert-dir="$STATE/certs" \
      --health-addr="127.0.0.1:${HP[$m]}" \
      --diagnostics-address="127.0.0.1:${DP[$m]}" \
      --insecure-diagnostics \
      --feature-gates="${GATES[$m]}" \
      --v="${CAPI_LOG_VERBOSITY:-2}" \
      "${client_args[@]}" \
      </dev/null >"$STATE/logs/$m.log" 2>&1 9>&- 8>&- &
    echo $! >"$STATE/pids/$m.pid"
  done

  # Ready = the health endpoint's readyz (includes the webhook server check) and a
  # TLS handshake with our CA on the webhook port (GET / answers 404; /convert
  # would log an error).
  local deadline=$(( $(date +%s) + ${CAPI_UP_TIMEOUT:-180} )) pending
  while :; do
    pending=()
    for m in "${MANAGERS[@]}"; do
      local pid
      pid="$(cat "$STATE/pids/$m.pid")"
      if ! kill -0 "$pid" 2>/dev/null; then
        tail -n 20 "$STATE/logs/$m.log" >&2
        die "$m manager exited (log: $STATE/logs/$m.log)"
      fi
      if ! curl -fsS -o /dev/null "http://127.0.0.1:${HP[$m]}/readyz" 2>/dev/null ||
        [ "$(curl -sS -o /dev/null -w '%{http_code}' --cacert "$STATE/certs/ca.crt" \
          "https://127.0.0.1:${WH[$m]}/" 2>/dev/null)" = 000 ]; then
        pending+=("$m")
      fi
    done
    [ ${#pending[@]} -eq 0 ] && break
    if [ "$(date +%s)" -ge "$deadline" ]; then
      die "managers not ready after ${CAPI_UP_TIMEOUT:-180}s: ${pending[*]} (logs: $STATE/logs)"
    fi
    sleep 1
  done
  log "managers ready in $(( $(date +%s) - t ))s"

  # The CAPD in-memory ClusterClass must pass core's and CAPD's webhooks: a server
  # dry run proves the API server reaches them by url through our CA.
  "${km[@]}" create --dry-run=server -f "$ROOT/config/samples/in-memory/clusterclass-in-memory.yaml" -n default >/dev/null ||
    die "dry-run of the in-memory ClusterClass failed: webhooks not reachable from the API server?"

  {
    printf '{\n'
    printf '  "managementKubeconfig": %s,\n' "$(json_str "$kc")"
    printf '  "kubectl": %s,\n' "$(json_str "$kubectl")"
    printf '  "capiVersion": %s,\n' "$(json_str "$CAPI_VERSION")"
    printf '  "caFile": %s,\n' "$(json_str "$STATE/certs/ca.crt")"
    printf '  "certDir": %s,\n' "$(json_str "$STATE/certs")"
    printf '  "manifestsDir": %s,\n' "$(json_str "$ROOT/config/samples/in-memory")"
    printf '  "managers": {\n'
    sep=""
    for m in "${MANAGERS[@]}"; do
      printf '%s    "%s": {"pid": %s, "binary": %s, "webhookPort": %s, "healthPort": %s, "diagnosticsPort": %s, "featureGates": %s, "log": %s}' \
        "$sep" "$m" "$(cat "$STATE/pids/$m.pid")" "$(json_str "${BIN[$m]}")" "${WH[$m]}" "${HP[$m]}" "${DP[$m]}" \
        "$(json_str "${GATES[$m]}")" "$(json_str "$STATE/logs/$m.log")"
      sep=$',\n'
    done
    printf '\n  }\n}\n'
  } >"$STATE/capi.json.tmp"
  mv "$STATE/capi.json.tmp" "$STATE/capi.json"
  trap - EXIT INT TERM
  log "Cluster API $CAPI_VERSION up in $(( $(date +%s) - start ))s: $STATE/capi.json"
}

register_extension() {
  local name="$1" url="$2" ca="$3" kc kubectl settings="" kv
  shift 3
  [ -f "$STATE/capi.json" ] || die "$STATE/capi.json not found: run scripts/capi.sh up first"
  [ -f "$ca" ] || die "CA file $ca not found"
  case "$url" in https://*) ;; *) die "CAPI calls extensions over https only: $url" ;; esac
  kc="$(json_get "$STATE/capi.json" managementKubeconfig)"
  kubectl="$(json_get "$STATE/capi.json" kubectl)"
  for kv in "$@"; do
    [[ "$kv" == *=* ]] || die "setting $kv: expected key=value"
    settings+="    $(json_str "${kv%%=*}"): $(json_str "${kv#*=}")"$'\n'
  done
  {
    echo "apiVersion: runtime.cluster.x-k8s.io/v1beta2"
    echo "kind: ExtensionConfig"
    echo "metadata:"
    echo "  name: $(json_str "$name")"
    echo "spec:"
    echo "  clientConfig:"
    echo "    url: $(json_str "$url")"
    echo "    caBundle: $(base64 -w0 <"$ca")"
    if [ -n "$settings" ]; then
      echo "  settings:"
      printf '%s' "$settings"
    fi
  } | "$kubectl" --kubeconfig "$kc" apply --server-side --force-conflicts -f - >/dev/null
  # Discovery runs when the ExtensionConfig changes; an extension that is down is
  # retried by CAPI with backoff, so a long wait here only means "not reachable".
  if ! "$kubectl" --kubeconfig "$kc" wait --for condition=Discovered=True --timeout 60s \
      "extensionconfig/$name" >/dev/null; then
    "$kubectl" --kubeconfig "$kc" get "extensionconfig/$name" \
      -o jsonpath='{range .status.conditions[*]}{.type}={.status} {.reason}: {.message}{"\n"}{end}' >&2 || true
    die "ExtensionConfig $name not discovered"
  fi
  "$kubectl" --kubeconfig "$kc" get "extensionconfig/$name" -o jsonpath='{range .status.handlers[*]}{.name}{"\n"}{end}'
}

[ $# -ge 2 ] || usage
cmd="$1"
case "$cmd" in
  up)
    [ $# -eq 3 ] || usage
    [ -d "$2" ] || die "test bed state dir $2 not found"
    TB="$(cd "$2" && pwd)"
    mkdir -p "$3"
    STATE="$(cd "$3" && pwd)"
    up "$TB"
    ;;
  down)
    [ $# -eq 2 ] || usage
    [ -d "$2" ] || { log "nothing to tear down in $2"; exit 0; }
    STATE="$(cd "$2" && pwd)"
    down
    log "Cluster API managers in $STATE are down"
    ;;
  register-extension)
    [ $# -ge 5 ] || usage
    STATE="$(cd "$2" && pwd)"
    shift 2
    register_extension "$@"
    ;;
  *) usage ;;
esac

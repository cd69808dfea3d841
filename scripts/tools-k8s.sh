#!/usr/bin/env bash
# Ensures the Kubernetes test-bed binaries exist in the tool cache, building
# them from the Go module proxy when missing, and prints their locations.
#
#   scripts/tools-k8s.sh                 # ensure, print `export VAR='path'` lines on stdout
#   scripts/tools-k8s.sh --env-file F    # ensure, also write the export lines to F
#   eval "$(scripts/tools-k8s.sh)"       # typical use
#
# Exported variables: KWOK_KUBE_APISERVER_BINARY, KWOK_KUBE_CONTROLLER_MANAGER_BINARY,
# KWOK_KUBE_SCHEDULER_BINARY, KWOK_CONTROLLER_BINARY, KWOK_ETCD_BINARY,
# KWOK_KUBECTL_BINARY, KWOKCTL, KUBECTL, KWOK_STAGES_DIR (kwok's stage YAMLs),
# CAPI_CRDS_DIR (Cluster API CRD YAMLs), CAPI_VERSION, KUBE_VERSION, DEPLOY_CRDS_DIR
# (the CRDs config/ refers to beyond Cluster API's: cert-manager's and the
# Prometheus operator's ServiceMonitor, for `kubectl apply --dry-run=server`).
# The KWOK_* names are the ones kwokctl reads, so `kwokctl create cluster
# --runtime binary` uses these local files instead of downloading anything.
#
# Cache: ${CAPI_UO_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/capi-upgrade-orchestrator}/tools/<name>-<version>/
# A binary already on PATH is used instead when its version fits.
# Progress goes to stderr; stdout carries only the export lines.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TOOLS_LOG=tools-k8s
# shellcheck source=scripts/tools-lib.sh
. "$ROOT/scripts/tools-lib.sh"

# Versions. Kubernetes and etcd come from the go.mod files (single source of truth).
ETCD_VERSION="$(gomod_require tools/etcd go.etcd.io/etcd/server/v3)"
KWOK_VERSION="v0.8.0"
# The CRDs of the Cluster API release tools/capi builds the managers of: one pin for both.
CAPI_VERSION="$(gomod_require tools/capi sigs.k8s.io/cluster-api)"
CERT_MANAGER_VERSION="v1.19.1"
PROMETHEUS_OPERATOR_VERSION="v0.85.0"

tool_args "$@"

# The Kubernetes release, checked against every k8s.io/* staging replace.
KUBE_VERSION="$(kube_version tools/k8s)"
[ -n "$ETCD_VERSION" ] || die "cannot read the etcd version from tools/etcd/go.mod"
[ -n "$CAPI_VERSION" ] || die "cannot read the sigs.k8s.io/cluster-api version from tools/capi/go.mod"

mkdir -p "$TOOLS"
# Serialise concurrent callers (e.g. two test runs) so a cold build happens once.
if command -v flock >/dev/null 2>&1; then
  exec 9>"$TOOLS/.tools-k8s.lock"
  flock 9
fi

KUBE_MINOR="$(echo "$KUBE_VERSION" | cut -d. -f2)"
KUBE_DIR="$TOOLS/kubernetes-$KUBE_VERSION"
ETCD_DIR="$TOOLS/etcd-$ETCD_VERSION"
KWOK_DIR="$TOOLS/kwok-$KWOK_VERSION"
CRDS_DIR="$TOOLS/cluster-api-crds-$CAPI_VERSION"
STAGES_DIR="$TOOLS/kwok-stages-$KWOK_VERSION"
DEPLOY_CRDS_DIR="$TOOLS/deploy-crds-cert-manager-$CERT_MANAGER_VERSION-prometheus-operator-$PROMETHEUS_OPERATOR_VERSION"

# --- Kubernetes: kube-apiserver, kube-controller-manager, kube-scheduler, kubectl ---

declare -A KPATH=()
kube_missing=()
for b in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
  if [ -x "$KUBE_DIR/$b" ]; then
    KPATH[$b]="$KUBE_DIR/$b"
    continue
  fi
  if [ "$b" = kubectl ]; then
    # kubectl: any client within the supported +/-1 minor skew.
    p="$(on_path kubectl "v1\.($((KUBE_MINOR - 1))|$KUBE_MINOR|$((KUBE_MINOR + 1)))\." version --client)" || p=""
  else
    p="$(on_path "$b" "Kubernetes ${KUBE_VERSION//./\\.}\$" --version)" || p=""
  fi
  if [ -n "$p" ]; then
    KPATH[$b]="$p"
  else
    kube_missing+=("$b")
  fi
done

if [ ${#kube_missing[@]} -gt 0 ]; then
  # TOOLS_K8S_ALSO: binaries of the same release another builder needs next (env.sh --nodes:
  # kubeadm, kubelet), made by this one `go build` rather than a second one over the same packages.
  # shellcheck disable=SC2206 # a space-separated list of binary names
  also=(${TOOLS_K8S_ALSO:-})
  kube_build tools/k8s "$KUBE_VERSION" "${kube_missing[@]}" "${also[@]}"
  for b in "${kube_missing[@]}"; do KPATH[$b]="$KUBE_DIR/$b"; done
fi

# --- etcd ---------------------------------------------------------------------

if [ -x "$ETCD_DIR/etcd" ]; then
  ETCD_BIN="$ETCD_DIR/etcd"
elif p="$(on_path etcd "etcd Version: 3\.6\." --version)"; then
  ETCD_BIN="$p"
else
  etcd_build "$ETCD_VERSION"
  ETCD_BIN="$ETCD_DIR/etcd"
fi

# --- kwok / kwokctl -----------------------------------------------------------

declare -A WPATH=()
kwok_missing=()
for b in kwok kwokctl; do
  if [ -x "$KWOK_DIR/$b" ]; then
    WPATH[$b]="$KWOK_DIR/$b"
  elif p="$(on_path "$b" "version ${KWOK_VERSION//./\\.}( |\$)" --version)"; then
    WPATH[$b]="$p"
  else
    kwok_missing+=("$b")
  fi
done

if [ ${#kwok_missing[@]} -gt 0 ]; then
  need_go
  pkgs=()
  for b in "${kwok_missing[@]}"; do pkgs+=("sigs.k8s.io/kwok/cmd/$b@$KWOK_VERSION"); done
  tmp="$(mktemp -d "$TOOLS/.kwok-$KWOK_VERSION.XXXXXX")"
  log "installing kwok $KWOK_VERSION: ${kwok_missing[*]}"
  # `go install pkg@version` ignores any enclosing module; run it from the cache dir anyway.
  if ! (cd "$TOOLS" && timed "kwok install" env CGO_ENABLED=0 GOBIN="$tmp" GOFLAGS='' \
      go install -trimpath -ldflags "-s -w" "${pkgs[@]}"); then
    rm -rf "$tmp"
    die "installing kwok $KWOK_VERSION failed (see the go output above)"
  fi
  mkdir -p "$KWOK_DIR"
  for b in "${kwok_missing[@]}"; do
    mv -f "$tmp/$b" "$KWOK_DIR/$b"
    WPATH[$b]="$KWOK_DIR/$b"
  done
  rm -rf "$tmp"
fi

# --- Cluster API CRDs ---------------------------------------------------------------

if [ ! -f "$CRDS_DIR/.complete" ]; then
  need_go
  log "fetching Cluster API $CAPI_VERSION CRDs (go mod download)"
  start=$(date +%s)
  capi_src="$(mod_dir "sigs.k8s.io/cluster-api@$CAPI_VERSION")"
  tmp="$(mktemp -d "$TOOLS/.cluster-api-crds-$CAPI_VERSION.XXXXXX")"
  # Core (cluster/machine*/clusterclass/extensionconfig/...), kubeadm bootstrap and
  # control plane. clusterctl's own CRDs are left out. v1.14 keeps the core CRDs in
  # core/config/crd/bases; older releases used config/crd/bases.
  n=0
  for d in core/config/crd/bases config/crd/bases bootstrap/kubeadm/config/crd/bases controlplane/kubeadm/config/crd/bases; do
    [ -d "$capi_src/$d" ] || continue
    for f in "$capi_src/$d"/*.yaml; do
      [ -e "$f" ] || continue
      cp "$f" "$tmp/"
      n=$((n + 1))
    done
  done
  [ "$n" -gt 0 ] || { rm -rf "$tmp"; die "no CRDs found in $capi_src"; }
  chmod -R u+w,go+rX "$tmp"
  printf '%s\n' "$CAPI_VERSION" >"$tmp/.complete"
  rm -rf "$CRDS_DIR"
  mv "$tmp" "$CRDS_DIR"
  log "Cluster API CRDs ($n files) ready in $(( $(date +%s) - start ))s"
fi

# --- CRDs of what config/ deploys next to the extension -------------------------------

if [ ! -f "$DEPLOY_CRDS_DIR/.complete" ]; then
  need_go
  log "fetching cert-manager $CERT_MANAGER_VERSION and Prometheus operator $PROMETHEUS_OPERATOR_VERSION CRDs (go mod download)"
  start=$(date +%s)
  cm_src="$(mod_dir "github.com/cert-manager/cert-manager@$CERT_MANAGER_VERSION")"
  po_src="$(mod_dir "github.com/prometheus-operator/prometheus-operator@$PROMETHEUS_OPERATOR_VERSION")"
  tmp="$(mktemp -d "$TOOLS/.deploy-crds.XXXXXX")"
  for f in "$cm_src"/deploy/crds/cert-manager.io_*.yaml "$po_src"/example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml; do
    [ -f "$f" ] || { rm -rf "$tmp"; die "CRD file missing from the module: $f"; }
    cp "$f" "$tmp/"
  done
  chmod -R u+w,go+rX "$tmp"
  printf '%s\n' "$CERT_MANAGER_VERSION $PROMETHEUS_OPERATOR_VERSION" >"$tmp/.complete"
  rm -rf "$DEPLOY_CRDS_DIR"
  mv "$tmp" "$DEPLOY_CRDS_DIR"
  log "deployment CRDs ready in $(( $(date +%s) - start ))s"
fi

# --- kwok stage configurations -------------------------------------------------
# kwok's own node and pod stages at the kwok release in use, as YAML files laid out
# as in kwok's kustomize/stage/ (node/fast/node-initialize.yaml, pod/fast/...), so
# the test bed can list them next to its own pod-delete stage (scripts/testbed.sh).

if [ ! -f "$STAGES_DIR/.complete" ]; then
  need_go
  kwok_src="$(mod_dir "sigs.k8s.io/kwok@$KWOK_VERSION")"
  tmp="$(mktemp -d "$TOOLS/.kwok-stages-$KWOK_VERSION.XXXXXX")"
  for f in node/fast/node-initialize node/heartbeat/node-heartbeat \
      node/heartbeat-with-lease/node-heartbeat-with-lease \
      pod/fast/pod-ready pod/fast/pod-complete pod/fast/pod-delete \
      pod/general/pod-delete; do
    src="$kwok_src/kustomize/stage/$f.yaml"
    [ -f "$src" ] || { rm -rf "$tmp"; die "kwok $KWOK_VERSION has no stage $f"; }
    mkdir -p "$tmp/$(dirname "$f")"
    cp "$src" "$tmp/$f.yaml"
  done
  chmod -R u+w,go+rX "$tmp"
  printf '%s\n' "$KWOK_VERSION" >"$tmp/.complete"
  rm -rf "$STAGES_DIR"
  mv "$tmp" "$STAGES_DIR"
  log "kwok $KWOK_VERSION stage configurations ready"
fi

# --- output -------------------------------------------------------------------

out="$(
  echo "export KUBE_VERSION=$(q "$KUBE_VERSION")"
  echo "export KWOK_KUBE_APISERVER_BINARY=$(q "${KPATH[kube-apiserver]}")"
  echo "export KWOK_KUBE_CONTROLLER_MANAGER_BINARY=$(q "${KPATH[kube-controller-manager]}")"
  echo "export KWOK_KUBE_SCHEDULER_BINARY=$(q "${KPATH[kube-scheduler]}")"
  echo "export KWOK_CONTROLLER_BINARY=$(q "${WPATH[kwok]}")"
  echo "export KWOK_ETCD_BINARY=$(q "$ETCD_BIN")"
  echo "export KWOK_KUBECTL_BINARY=$(q "${KPATH[kubectl]}")"
  echo "export KUBECTL=$(q "${KPATH[kubectl]}")"
  echo "export KWOKCTL=$(q "${WPATH[kwokctl]}")"
  echo "export KWOK_STAGES_DIR=$(q "$STAGES_DIR")"
  echo "export CAPI_VERSION=$(q "$CAPI_VERSION")"
  echo "export CAPI_CRDS_DIR=$(q "$CRDS_DIR")"
  echo "export DEPLOY_CRDS_DIR=$(q "$DEPLOY_CRDS_DIR")"
)"
print_exports "$out"

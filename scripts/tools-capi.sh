#!/usr/bin/env bash
# Ensures the real Cluster API managers exist in the tool cache, building them from
# the Go module proxy (module tools/capi) when missing, and prints their locations.
#
#   scripts/tools-capi.sh                 # ensure, print `export VAR='path'` lines on stdout
#   scripts/tools-capi.sh --env-file F    # ensure, also write the export lines to F
#   eval "$(scripts/tools-capi.sh)"       # typical use
#   scripts/tools-capi.sh test-extension  # instead: only CAPI's test extension (benchmarks)
#
# Exported variables: CAPI_VERSION, CAPI_TEST_VERSION, CAPI_MANAGER_BINARY (core), CABPK_MANAGER_BINARY
# (kubeadm bootstrap), KCP_MANAGER_BINARY (kubeadm control plane), CAPD_MANAGER_BINARY
# (Docker provider, used with its in-memory backend), CLUSTERCTL_BINARY (clusterctl at
# the same release: the release test installs the extension with it), CAPI_MODULE_DIR and
# CAPI_TEST_MODULE_DIR (module-cache sources of sigs.k8s.io/cluster-api and
# sigs.k8s.io/cluster-api/test at CAPI_VERSION: CRDs, webhook manifests, templates).
#
# `test-extension` builds nothing of the above: it ensures CAPI's own Runtime
# Extension used by its e2e tests (sigs.k8s.io/cluster-api/test/extension, the
# reference bench/upgrade-plan-vs-go.ts measures against) and exports only
# CAPI_VERSION and CAPI_TEST_EXTENSION_BINARY. It has its own revision stamp, so
# it never invalidates the cached managers, nor they it.
#
# Cache: ${CAPI_UO_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/capi-upgrade-orchestrator}/tools/cluster-api-<version>/
# Progress goes to stderr; stdout carries only the export lines.
#
# The managers are built from patched copies of two upstream files (go build
# -modfile with replaces to the copies) so that nothing listens beyond loopback,
# which upstream offers no flag for:
#   - controller-runtime's webhook server defaults its host to 127.0.0.1 (all four
#     managers and the test extension; upstream listens on every interface);
#   - CAPD's in-memory workload API servers and debug server listen on 127.0.0.1,
#     the debug server on an ephemeral port (upstream: fixed :19000, so a second
#     CAPD on the machine would exit), and the workload port picker skips ports
#     already in use (upstream TODO) so two CAPDs on one machine do not collide;
#   - before v1.14, CAPD's in-memory Nodes report the Machine's version as their
#     kubelet's (v1.14 does it upstream), as a real kubelet does.
# A patch that no longer applies (new CAPI/controller-runtime release) fails the build.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${CAPI_UO_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/capi-upgrade-orchestrator}"
TOOLS="$CACHE/tools"
MOD="$ROOT/tools/capi"
# Bump when the patches or build flags change: cached binaries of another
# revision are rebuilt.
BUILD_REV=2
# The same for the test extension (test-extension mode), stamped separately.
TEST_EXTENSION_BUILD_REV=1

log() { printf '[tools-capi] %s\n' "$*" >&2; }
die() { printf '[tools-capi] error: %s\n' "$*" >&2; exit 1; }

ENV_FILE=""
MODE=managers
while [ $# -gt 0 ]; do
  case "$1" in
    --env-file) ENV_FILE="${2:?--env-file needs a path}"; shift 2 ;;
    --env-file=*) ENV_FILE="${1#*=}"; shift ;;
    ensure) MODE=managers; shift ;;
    test-extension) MODE=test-extension; shift ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) die "unknown argument: $1" ;;
  esac
done

command -v go >/dev/null 2>&1 ||
  die "'go' not found on PATH: install Go >= 1.26 (needed to build Cluster API from the Go module proxy)"

# The CAPI version is the one in tools/capi/go.mod (single source of truth); the
# api and test modules must be at the same release.
req() { awk -v m="$1" '($1 == m && $2 ~ /^v/) || ($1 == "require" && $2 == m) { print ($1 == m ? $2 : $3); exit }' "$MOD/go.mod"; }
PINNED="$(req sigs.k8s.io/cluster-api)"
[ -n "$PINNED" ] || die "cannot read the sigs.k8s.io/cluster-api version from tools/capi/go.mod"
for m in sigs.k8s.io/cluster-api/api sigs.k8s.io/cluster-api/test; do
  [ "$(req "$m")" = "$PINNED" ] || die "tools/capi/go.mod: $m is at $(req "$m"), not $PINNED"
done
# CAPI_VERSION=vX.Y.Z (the compatibility matrix: `make test-capi CAPI_VERSION=v1.13.6`) builds
# another release from a module of its own, tidied once into the cache. CAPI_TEST_VERSION names
# the release of sigs.k8s.io/cluster-api/test (CAPD) when the module proxy does not serve it at
# CAPI_VERSION (v1.13: core up to v1.13.6, test from v1.13.7).
CAPI_VERSION="${CAPI_VERSION:-$PINNED}"
CAPI_TEST_VERSION="${CAPI_TEST_VERSION:-$CAPI_VERSION}"
for v in "$CAPI_VERSION" "$CAPI_TEST_VERSION"; do
  [[ "$v" =~ ^v1\.[0-9]+\.[0-9]+$ ]] || die "CAPI_VERSION / CAPI_TEST_VERSION $v: expected a release such as v1.13.6"
done
CAPI_MINOR="$(echo "$CAPI_VERSION" | cut -d. -f2)"

mkdir -p "$TOOLS"
# Serialise concurrent callers so a cold build happens once (per release: building another
# one for the compatibility matrix does not hold up the tier's).
lock="$TOOLS/.tools-capi.lock"
[ "$CAPI_VERSION" = "$PINNED" ] && [ "$CAPI_TEST_VERSION" = "$PINNED" ] || lock="$TOOLS/.tools-capi-$CAPI_VERSION-$CAPI_TEST_VERSION.lock"
if command -v flock >/dev/null 2>&1; then
  exec 9>"$lock"
  flock 9
fi

# The core manager's main package moved from the module root to core/ in v1.14.
CORE_PKG=sigs.k8s.io/cluster-api/core
[ "$CAPI_MINOR" -ge 14 ] || CORE_PKG=sigs.k8s.io/cluster-api
TOOL_PACKAGES=("$CORE_PKG" sigs.k8s.io/cluster-api/bootstrap/kubeadm
  sigs.k8s.io/cluster-api/controlplane/kubeadm sigs.k8s.io/cluster-api/test/infrastructure/docker
  sigs.k8s.io/cluster-api/cmd/clusterctl)
if [ "$CAPI_VERSION" != "$PINNED" ] || [ "$CAPI_TEST_VERSION" != "$PINNED" ]; then
  ALT="$TOOLS/capi-module-$CAPI_VERSION-test-$CAPI_TEST_VERSION"
  # Tidied again when the list of tools changed.
  if [ ! -s "$ALT/go.sum" ] || [ "$(cat "$ALT/.tools" 2>/dev/null || true)" != "${TOOL_PACKAGES[*]}" ]; then
    log "resolving Cluster API $CAPI_VERSION (test module $CAPI_TEST_VERSION) from the Go module proxy"
    tmp="$(mktemp -d "$TOOLS/.capi-module.XXXXXX")"
    # A fresh module with the same tools: tidy then picks the dependencies that release was
    # built with (a copy of go.mod would hold it to this release's newer Kubernetes libraries).
    {
      echo "module github.com/capi-upgrade-orchestrator/tools/capi"
      echo "go $(awk '$1 == "go" { print $2; exit }' "$MOD/go.mod")"
      echo "tool ("
      for p in "${TOOL_PACKAGES[@]}"; do echo "	$p"; done
      echo ")"
      echo "require sigs.k8s.io/cluster-api $CAPI_VERSION"
      echo "require sigs.k8s.io/cluster-api/test $CAPI_TEST_VERSION"
      echo "replace sigs.k8s.io/cluster-api => sigs.k8s.io/cluster-api $CAPI_VERSION"
      echo "replace sigs.k8s.io/cluster-api/test => sigs.k8s.io/cluster-api/test $CAPI_TEST_VERSION"
      # From v1.14 the API types are a module of their own.
      if [ "$CAPI_MINOR" -ge 14 ]; then
        echo "require sigs.k8s.io/cluster-api/api $CAPI_VERSION"
        echo "replace sigs.k8s.io/cluster-api/api => sigs.k8s.io/cluster-api/api $CAPI_VERSION"
      fi
    } >"$tmp/go.mod"
    (cd "$tmp" && GOFLAGS='' go mod tidy) || { rm -rf "$tmp"; die "go mod tidy for Cluster API $CAPI_VERSION failed (is that release served by the Go module proxy?)"; }
    printf '%s\n' "${TOOL_PACKAGES[*]}" >"$tmp/.tools"
    rm -rf "$ALT" && mv "$tmp" "$ALT"
  fi
  MOD="$ALT"
fi

DIR="$TOOLS/cluster-api-$CAPI_VERSION"
[ "$CAPI_TEST_VERSION" = "$CAPI_VERSION" ] || DIR+="-test-$CAPI_TEST_VERSION"
# binary name -> package
declare -A PKG=(
  [capi-manager]=$CORE_PKG
  [cabpk-manager]=sigs.k8s.io/cluster-api/bootstrap/kubeadm
  [kcp-manager]=sigs.k8s.io/cluster-api/controlplane/kubeadm
  [capd-manager]=sigs.k8s.io/cluster-api/test/infrastructure/docker
  [clusterctl]=sigs.k8s.io/cluster-api/cmd/clusterctl
)
BINARIES=(capi-manager cabpk-manager kcp-manager capd-manager clusterctl)

# Module directories as the build resolves them (downloads when missing).
MODULES=(sigs.k8s.io/cluster-api sigs.k8s.io/cluster-api/test sigs.k8s.io/controller-runtime)
mod_dirs="$(cd "$MOD" && GOFLAGS='' go list -m -f '{{.Path}} {{.Dir}}' "${MODULES[@]}" 2>/dev/null)" || mod_dirs=""
moddir() { awk -v m="$1" '$1 == m { print $2 }' <<<"$mod_dirs"; }
modules_present() { # every module the build reads sources from, not just the first
  local m d
  for m in "${MODULES[@]}"; do
    d="$(moddir "$m")"
    [ -n "$d" ] && [ -d "$d" ] || return 1
  done
}
if ! modules_present; then
  log "downloading Cluster API $CAPI_VERSION modules (go mod download)"
  (cd "$MOD" && GOFLAGS='' go mod download) || die "go mod download in tools/capi failed"
  mod_dirs="$(cd "$MOD" && GOFLAGS='' go list -m -f '{{.Path}} {{.Dir}}' "${MODULES[@]}")"
fi
CAPI_DIR="$(moddir sigs.k8s.io/cluster-api)"
CAPI_TEST_DIR="$(moddir sigs.k8s.io/cluster-api/test)"
CR_DIR="$(moddir sigs.k8s.io/controller-runtime)"
for m in "${MODULES[@]}"; do
  d="$(moddir "$m")"
  if [ -z "$d" ] || [ ! -d "$d" ]; then die "module directory of $m missing after go mod download (${d:-not resolved})"; fi
done

# patch_sources DIR: writes patched copies of controller-runtime and of the CAPI
# test module under DIR, and DIR/go.mod (+ go.sum): tools/capi/go.mod with replaces
# to those copies, used with `go build -modfile` so tools/capi itself stays pristine.
# (A build -overlay cannot be used: Go refuses to overlay files in the module cache.)
patch_sources() {
  local out="$1" cr="$1/controller-runtime" ct="$1/cluster-api-test" f n
  cp -R "$CR_DIR" "$cr"
  cp -R "$CAPI_TEST_DIR" "$ct"
  chmod -R u+w "$cr" "$ct" # module cache files are read-only

  f="$cr/pkg/webhook/server.go"
  sed -i '/^func (o \*Options) setDefaults() {$/a\
	// capi-upgrade-orchestrator test build: listen on loopback unless a host is set.\
	if o.Host == "" {\
		o.Host = "127.0.0.1"\
	}' "$f"
  n="$(grep -c 'o.Host = "127.0.0.1"' "$f" || true)"
  [ "$n" = 1 ] || die "cannot patch controller-runtime's webhook server (setDefaults not found)"

  f="$ct/infrastructure/inmemory/pkg/server/mux.go"
  sed -i -e 's|net.Listen("tcp", fmt.Sprintf(":%d", options.DebugPort))|net.Listen("tcp", "127.0.0.1:0")|' \
      -e 's|net.Listen("tcp", fmt.Sprintf(":%d", wcl.Port()))|net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", wcl.Port()))|' \
      -e '/^	\/\/ TODO: check the port is actually free. If not try the next one$/c\
	// capi-upgrade-orchestrator test build: skip ports already taken on loopback\
	// (another CAPD or another program), instead of failing to listen later.\
	for ; port <= m.maxPort; port++ {\
		if l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil { //nolint:noctx\
			_ = l.Close()\
			break\
		}\
	}\
	if port > m.maxPort {\
		return -1, pkgerrors.Errorf("no more free ports in the %d-%d range", m.minPort, m.maxPort)\
	}\
	m.portIndex = port' "$f"
  # github.com/pkg/errors is imported as pkgerrors from v1.14, as errors before.
  grep -q 'pkgerrors "github.com/pkg/errors"' "$f" || sed -i 's/return -1, pkgerrors.Errorf(/return -1, errors.Errorf(/' "$f"
  n="$(grep -c '127.0.0.1' "$f" || true)"
  [ "$n" = 4 ] || die "cannot patch CAPD's in-memory server (expected 4 loopback edits, got $n)"
  ! grep -q 'net.Listen("tcp", fmt.Sprintf(":%d"' "$f" || die "CAPD's in-memory server still listens on all interfaces"

  # Before v1.14 an in-memory Node reports no kubelet version (v1.14 added exactly this
  # field); a real kubelet always does, and the extension's health checks read it.
  f="$ct/infrastructure/docker/internal/controllers/backends/inmemory/inmemorymachine_backend.go"
  if ! grep -q 'KubeletVersion: machine.Spec.Version' "$f"; then
    sed -i '0,/^\t\tStatus: corev1.NodeStatus{$/s//\t\tStatus: corev1.NodeStatus{\n\t\t\tNodeInfo: corev1.NodeSystemInfo{KubeletVersion: machine.Spec.Version},/' "$f"
    n="$(grep -c 'KubeletVersion: machine.Spec.Version' "$f" || true)"
    [ "$n" = 1 ] || die "cannot patch CAPD's in-memory Node (its NodeStatus literal not found)"
  fi

  cp "$MOD/go.mod" "$MOD/go.sum" "$out/"
  go mod edit -replace "sigs.k8s.io/controller-runtime=$cr" \
    -replace "sigs.k8s.io/cluster-api/test=$ct" "$out/go.mod"
}

q() { printf "'%s'" "${1//\'/\'\\\'\'}"; }
emit() { # prints the export lines on stdout, and to ENV_FILE when asked
  if [ -n "$ENV_FILE" ]; then
    mkdir -p "$(dirname "$ENV_FILE")"
    printf '%s\n' "$1" >"$ENV_FILE"
  fi
  printf '%s\n' "$1"
}

if [ "$MODE" = test-extension ]; then
  # Built with the same patched controller-runtime as the managers: the
  # extension's webhook server has no host flag and would otherwise listen on
  # every interface.
  bin="$DIR/capi-test-extension"
  if [ ! -x "$bin" ] || [ "$(cat "$DIR/.build-rev-test-extension" 2>/dev/null || true)" != "$TEST_EXTENSION_BUILD_REV" ]; then
    tmp="$(mktemp -d "$TOOLS/.cluster-api-$CAPI_VERSION.XXXXXX")"
    trap 'rm -rf "$tmp"' EXIT
    patch_sources "$tmp"
    vars="-X sigs.k8s.io/cluster-api/version.gitVersion=$CAPI_VERSION -X sigs.k8s.io/cluster-api/version.gitMajor=1"
    vars+=" -X sigs.k8s.io/cluster-api/version.gitMinor=$CAPI_MINOR -X sigs.k8s.io/cluster-api/version.gitTreeState=clean"
    log "building Cluster API $CAPI_VERSION test extension (cold: a few minutes)"
    start=$(date +%s)
    env CGO_ENABLED=0 go build -C "$MOD" -trimpath -modfile "$tmp/go.mod" -ldflags "-s -w $vars" \
      -o "$tmp/capi-test-extension" sigs.k8s.io/cluster-api/test/extension ||
      die "building the Cluster API $CAPI_VERSION test extension failed (see the go output above)"
    mkdir -p "$DIR"
    mv -f "$tmp/capi-test-extension" "$bin"
    printf '%s\n' "$TEST_EXTENSION_BUILD_REV" >"$DIR/.build-rev-test-extension"
    log "Cluster API test extension built in $(( $(date +%s) - start ))s"
  fi
  emit "$(
    echo "export CAPI_VERSION=$(q "$CAPI_VERSION")"
    echo "export CAPI_TEST_EXTENSION_BINARY=$(q "$bin")"
  )"
  exit 0
fi

missing=()
for b in "${BINARIES[@]}"; do
  [ -x "$DIR/$b" ] || missing+=("$b")
done
if [ ${#missing[@]} -eq 0 ] && [ "$(cat "$DIR/.build-rev" 2>/dev/null || true)" != "$BUILD_REV" ]; then
  log "cached managers in $DIR are from another build revision: rebuilding"
  missing=("${BINARIES[@]}")
fi

if [ ${#missing[@]} -gt 0 ]; then
  tmp="$(mktemp -d "$TOOLS/.cluster-api-$CAPI_VERSION.XXXXXX")"
  trap 'rm -rf "$tmp"' EXIT
  patch_sources "$tmp"
  # Stamp the release like CAPI's own Makefile (hack/scripts/release/version.sh):
  # managers log it and report it in their user agent.
  vars="-X sigs.k8s.io/cluster-api/version.gitVersion=$CAPI_VERSION -X sigs.k8s.io/cluster-api/version.gitMajor=1"
  vars+=" -X sigs.k8s.io/cluster-api/version.gitMinor=$CAPI_MINOR -X sigs.k8s.io/cluster-api/version.gitTreeState=clean"
  gob=(env CGO_ENABLED=0 go build -C "$MOD" -trimpath -modfile "$tmp/go.mod" -ldflags "-s -w $vars")
  pkgs=()
  for b in "${missing[@]}"; do pkgs+=("${PKG[$b]}"); done
  log "building Cluster API $CAPI_VERSION managers: ${missing[*]} (cold: several minutes)"
  start=$(date +%s)
  # One go build over all packages compiles the shared dependencies in parallel;
  # the per-binary builds below then only link (two packages are both named kubeadm,
  # so `-o DIR/` cannot name them).
  # (With one package, go build would write its binary into tools/capi: the build below does it.)
  if [ ${#pkgs[@]} -gt 1 ]; then
    "${gob[@]}" "${pkgs[@]}" || die "building Cluster API $CAPI_VERSION failed (see the go output above)"
  fi
  for b in "${missing[@]}"; do
    "${gob[@]}" -o "$tmp/$b" "${PKG[$b]}" || die "building $b failed (see the go output above)"
  done
  mkdir -p "$DIR"
  for b in "${missing[@]}"; do mv -f "$tmp/$b" "$DIR/$b"; done
  printf '%s\n' "$BUILD_REV" >"$DIR/.build-rev"
  log "Cluster API managers built in $(( $(date +%s) - start ))s"
fi

emit "$(
  echo "export CAPI_VERSION=$(q "$CAPI_VERSION")"
  echo "export CAPI_TEST_VERSION=$(q "$CAPI_TEST_VERSION")"
  echo "export CAPI_MANAGER_BINARY=$(q "$DIR/capi-manager")"
  echo "export CABPK_MANAGER_BINARY=$(q "$DIR/cabpk-manager")"
  echo "export KCP_MANAGER_BINARY=$(q "$DIR/kcp-manager")"
  echo "export CAPD_MANAGER_BINARY=$(q "$DIR/capd-manager")"
  echo "export CLUSTERCTL_BINARY=$(q "$DIR/clusterctl")"
  echo "export CAPI_MODULE_DIR=$(q "$CAPI_DIR")"
  echo "export CAPI_TEST_MODULE_DIR=$(q "$CAPI_TEST_DIR")"
)"

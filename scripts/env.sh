# shellcheck shell=bash
# Sourced by the Makefile: makes sure every tool the project needs is present
# (installing what is missing into a versioned cache outside the repository)
# and exports PATH, TEMPORAL_CLI and, when found, TCTL_CLI.
#   source scripts/env.sh            # node 24, npm deps, temporal CLI
#   source scripts/env.sh --testbed  # also the Kubernetes test-bed binaries
#   source scripts/env.sh --testbed --capi  # and the Cluster API managers (real-CAPI tier)
#   source scripts/env.sh --nodes    # also what the real-node tier's nodes are made of
#                                    # (scripts/tools-nodes.sh: both Kubernetes releases, etcd, containerd,
#                                    # crictl, pause, registry, a Debian root file system; exports NODE_*, REGISTRY_BINARY)
#   source scripts/env.sh --lint     # also shellcheck (Debian's package when root)
#   source scripts/env.sh --alerts   # also Prometheus and Alertmanager (Debian's packages when root;
#                                    # the alert gate's integration tests; exports PROMETHEUS_BIN, ALERTMANAGER_BIN)
#   source scripts/env.sh --temporal-production  # also the Temporal server and PostgreSQL
#                                    # (scripts/temporal-production.sh; exports TEMPORAL_SERVER_BIN,
#                                    # TEMPORAL_SQL_TOOL, POSTGRES_BIN_DIR)
# Nothing is downloaded except through the npm registry and the Go module proxy.

CAPI_UO_CACHE="${CAPI_UO_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/capi-upgrade-orchestrator}"
export CAPI_UO_CACHE
# npm and Node 24 keep compiled modules in $TMPDIR/node-compile-cache unless told otherwise:
# in the tool cache, a run leaves nothing in /tmp.
export NODE_COMPILE_CACHE="${NODE_COMPILE_CACHE:-$CAPI_UO_CACHE/node-compile-cache}"
NODE_MAJOR=24
TEMPORAL_CLI_VERSION=v1.5.1
TCTL_VERSION=v1.18.4
# The server release the CLI's dev server embeds (cli v1.5.1 → server v1.29.1);
# docker-compose.yml pins the same (a unit test compares them).
TEMPORAL_SERVER_VERSION=v1.29.1
POSTGRES_MAJOR=15

_uo_log() { printf '\033[2m[bootstrap]\033[0m %s\n' "$*" >&2; }
_uo_die() { printf '[bootstrap] error: %s\n' "$*" >&2; return 1; }

_uo_node() {
  local major
  major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
  if [ "$major" -ge "$NODE_MAJOR" ]; then return 0; fi
  local dir="$CAPI_UO_CACHE/node-$NODE_MAJOR"
  if [ ! -x "$dir/node_modules/.bin/node" ]; then
    command -v npm >/dev/null || { _uo_die "npm not found: install Node.js (20 or newer) with npm"; return 1; }
    _uo_log "node $major is older than $NODE_MAJOR: installing node@$NODE_MAJOR from the npm registry into $dir"
    mkdir -p "$dir"
    # The `node` package ships the binary through a platform package; its
    # preinstall script is what fetches that package, so scripts must run.
    npm install --prefix "$dir" --no-audit --no-fund --loglevel=error "node@$NODE_MAJOR" >&2 || { _uo_die "npm install node@$NODE_MAJOR failed"; return 1; }
  fi
  export PATH="$dir/node_modules/.bin:$PATH"
  major=$(node -p 'process.versions.node.split(".")[0]')
  [ "$major" -ge "$NODE_MAJOR" ] || { _uo_die "node@$NODE_MAJOR installed but node reports $major"; return 1; }
}

_uo_deps() {
  # Reinstall when the lock file changed since the last install. `npm install
  # --no-save` installs the locked versions and never rewrites the lock; npm
  # 11's `npm ci` rejects the lock it writes itself (it records only this
  # platform's optional packages, then reports the others as missing).
  if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
    _uo_log "installing npm dependencies (locked versions)"
    npm install --no-save --no-audit --no-fund --loglevel=error >&2 || { _uo_die "npm install failed"; return 1; }
  fi
}

_uo_go_install() { # name version module-path [name go install gives the binary] [ldflags]
  # Linker flags (a version stamp) are part of the cache key: a build without them is not reused.
  local name=$1 version=$2 pkg=$3 built=${4:-$1} ldflags=${5:-} key=$2
  if [ -n "$ldflags" ]; then key="$version-$(printf '%s' "$ldflags" | cksum | cut -d' ' -f1)"; fi
  local dir="$CAPI_UO_CACHE/tools/$name-$key"
  if [ -x "$dir/$name" ]; then printf '%s\n' "$dir/$name"; return 0; fi
  command -v go >/dev/null || { _uo_die "'$name' is not on PATH and Go is not installed: install Go (1.24+) or put '$name' on PATH"; return 1; }
  mkdir -p "$CAPI_UO_CACHE/tools"
  # Several `make` runs starting at once on a cold cache build once: the others
  # wait for the lock and then find the binary. The build goes to a private
  # directory and is moved into place whole, so no caller sees half of it.
  (
    if command -v flock >/dev/null; then flock 8; fi
    if [ -x "$dir/$name" ]; then exit 0; fi
    _uo_log "building $name $version with go install (first run only; takes minutes)"
    start=$SECONDS
    tmp=$(mktemp -d "$CAPI_UO_CACHE/tools/.$name-$version.XXXXXX") || exit 1
    if ! GOBIN="$tmp" GOFLAGS="${GOFLAGS:-} -trimpath" go install ${ldflags:+-ldflags "$ldflags"} "$pkg@$version" >&2; then
      rm -rf "$tmp"
      exit 1
    fi
    if [ "$built" != "$name" ]; then mv "$tmp/$built" "$tmp/$name" || exit 1; fi
    rm -rf "$dir" && mv "$tmp" "$dir" || exit 1
    _uo_log "built $name in $((SECONDS - start))s"
  ) 8>"$CAPI_UO_CACHE/tools/.$name.lock" || { _uo_die "go install $pkg@$version failed"; return 1; }
  printf '%s\n' "$dir/$name"
}

_uo_temporal() {
  if [ -z "${TEMPORAL_CLI:-}" ]; then
    if command -v temporal >/dev/null && temporal server start-dev --help 2>/dev/null | grep -q -- '--sqlite-pragma'; then
      TEMPORAL_CLI=$(command -v temporal)
    else
      # Stamped as upstream's release builds are (`temporal --version` says 0.0.0-DEV without it).
      TEMPORAL_CLI=$(_uo_go_install temporal "$TEMPORAL_CLI_VERSION" github.com/temporalio/cli/cmd/temporal temporal \
        "-X github.com/temporalio/cli/temporalcli.Version=${TEMPORAL_CLI_VERSION#v}") || return 1
    fi
  fi
  export TEMPORAL_CLI
  PATH="$(dirname "$TEMPORAL_CLI"):$PATH"
  export PATH
  # tctl is deprecated upstream and the module proxy here does not serve it:
  # use it when it is on PATH or in the cache, otherwise go on without it.
  if [ -z "${TCTL_CLI:-}" ]; then
    if command -v tctl >/dev/null; then TCTL_CLI=$(command -v tctl)
    elif [ -x "$CAPI_UO_CACHE/tools/tctl-$TCTL_VERSION/tctl" ]; then TCTL_CLI="$CAPI_UO_CACHE/tools/tctl-$TCTL_VERSION/tctl"
    elif command -v go >/dev/null && [ ! -e "$CAPI_UO_CACHE/tools/tctl-$TCTL_VERSION.unavailable" ]; then
      if TCTL_CLI=$(_uo_go_install tctl "$TCTL_VERSION" github.com/temporalio/tctl/cmd/tctl 2>/dev/null); then :; else
        TCTL_CLI=""; mkdir -p "$CAPI_UO_CACHE/tools"; : > "$CAPI_UO_CACHE/tools/tctl-$TCTL_VERSION.unavailable"
        _uo_log "tctl $TCTL_VERSION cannot be built here (module proxy refuses it): tctl-specific checks will be reported as not run"
      fi
    fi
  fi
  if [ -n "${TCTL_CLI:-}" ]; then export TCTL_CLI; fi
}

# The linter shellcheck checks the node upgrade script (it runs as root on every node) and
# these scripts; `make test` must not skip that on a machine that lacks it.
_uo_shellcheck() {
  command -v shellcheck >/dev/null && return 0
  if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    _uo_log "installing shellcheck from Debian's packages"
    { apt-get install -y -qq shellcheck >/dev/null 2>&1 ||
      { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq shellcheck >/dev/null 2>&1; }; } ||
      { _uo_die "apt-get install shellcheck failed"; return 1; }
  else
    _uo_die "shellcheck not found: install it (Debian/Ubuntu: apt-get install shellcheck; macOS: brew install shellcheck)"
    return 1
  fi
}

# Prometheus and Alertmanager from Debian's packages: the alert gate's integration tests run
# against the real ones (test/support/alerting.ts starts them on loopback ports).
_uo_alerts() {
  local pkg bin var
  for pkg in prometheus:prometheus:PROMETHEUS_BIN prometheus-alertmanager:prometheus-alertmanager:ALERTMANAGER_BIN; do
    bin=${pkg#*:}; var=${bin#*:}; bin=${bin%%:*}; pkg=${pkg%%:*}
    # policy-rc.d (containers) or no init keeps the packages' services from starting.
    command -v "$bin" >/dev/null || _uo_apt_install "$pkg" "$bin not found (or put it on PATH)" || return 1
    export "$var=$(command -v "$bin")"
  done
}

# The Temporal server's services and its SQL tool, built from the Go module
# proxy, and PostgreSQL from Debian's packages: the production-shaped Temporal.
_uo_temporal_production() {
  if [ -z "${TEMPORAL_SERVER_BIN:-}" ]; then
    TEMPORAL_SERVER_BIN=$(_uo_go_install temporal-server "$TEMPORAL_SERVER_VERSION" go.temporal.io/server/cmd/server server) || return 1
  fi
  if [ -z "${TEMPORAL_SQL_TOOL:-}" ]; then
    TEMPORAL_SQL_TOOL=$(_uo_go_install temporal-sql-tool "$TEMPORAL_SERVER_VERSION" go.temporal.io/server/cmd/tools/sql sql) || return 1
  fi
  export TEMPORAL_SERVER_BIN TEMPORAL_SQL_TOOL
  if [ -z "${POSTGRES_BIN_DIR:-}" ]; then
    POSTGRES_BIN_DIR="/usr/lib/postgresql/$POSTGRES_MAJOR/bin"
    if [ ! -x "$POSTGRES_BIN_DIR/postgres" ]; then
      if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
        _uo_log "installing PostgreSQL $POSTGRES_MAJOR from Debian's packages"
        { DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "postgresql-$POSTGRES_MAJOR" >/dev/null 2>&1 ||
          { apt-get update -qq >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "postgresql-$POSTGRES_MAJOR" >/dev/null 2>&1; }; } ||
          { _uo_die "apt-get install postgresql-$POSTGRES_MAJOR failed"; return 1; }
      else
        _uo_die "PostgreSQL $POSTGRES_MAJOR not found in $POSTGRES_BIN_DIR: install it (Debian/Ubuntu: apt-get install postgresql-$POSTGRES_MAJOR) or set POSTGRES_BIN_DIR"
        return 1
      fi
    fi
  fi
  export POSTGRES_BIN_DIR
}

_uo_testbed() {
  local out
  # With --nodes, the node binaries of the test bed's release come from the same build.
  out=$(TOOLS_K8S_ALSO="${_uo_k8s_also:-}" bash scripts/tools-k8s.sh) || { _uo_die "building the Kubernetes test-bed binaries failed"; return 1; }
  eval "$out"
}

_uo_capi() {
  local out
  # The release asked for (make test-capi CAPI_VERSION=…), not the test bed's CRD release
  # that _uo_testbed exported under the same name.
  out=$(CAPI_VERSION="${_uo_capi_version:-}" bash scripts/tools-capi.sh) ||
    { _uo_die "building the Cluster API managers failed"; return 1; }
  eval "$out"
}

# _uo_apt_install PACKAGE WHY: installs a Debian package as root, else fails naming it and WHY.
_uo_apt_install() {
  if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    _uo_log "installing $1 from Debian's packages"
    { DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$1" >/dev/null 2>&1 ||
      { apt-get update -qq >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$1" >/dev/null 2>&1; }; } ||
      { _uo_die "apt-get install $1 failed"; return 1; }
  else
    _uo_die "$2: install it (Debian/Ubuntu: apt-get install $1)"
    return 1
  fi
}

_uo_nodes() {
  local out
  # The node host (systemd-nspawn), the relays into the nodes' network (socat) and the job
  # executor image's userland: busybox-static (Debian's busybox is the same path, dynamic).
  command -v systemd-nspawn >/dev/null || _uo_apt_install systemd-container "systemd-nspawn not found" || return 1
  command -v socat >/dev/null || _uo_apt_install socat "socat not found" || return 1
  { [ -x /bin/busybox ] && ! head -c 4096 /bin/busybox | grep -q ld-linux; } ||
    _uo_apt_install busybox-static "a static /bin/busybox is needed for the job executor's image" || return 1
  out=$(bash scripts/tools-nodes.sh) || { _uo_die "building what the nodes are made of failed"; return 1; }
  eval "$out"
}


_uo_main() {
  local arg testbed="" capi="" lint="" production="" alerts="" nodes=""
  for arg in "$@"; do
    case "$arg" in
      --testbed) testbed=1 ;;
      --capi) capi=1 ;;
      --nodes) nodes=1 ;;
      --lint) lint=1 ;;
      --temporal-production) production=1 ;;
      --alerts) alerts=1 ;;
      *) _uo_die "unknown option $arg (expected --testbed, --capi, --nodes, --lint, --temporal-production, --alerts)"; return 1 ;;
    esac
  done
  _uo_capi_version="${CAPI_VERSION:-}"
  _uo_k8s_also="${nodes:+kubeadm kubelet}"
  if [ -n "$lint" ]; then _uo_shellcheck || return 1; fi
  if [ -n "$alerts" ]; then _uo_alerts || return 1; fi
  _uo_node || return 1
  _uo_deps || return 1
  _uo_temporal || return 1
  if [ -n "$testbed" ] || [ -n "$capi" ]; then _uo_testbed || return 1; fi
  if [ -n "$capi" ]; then _uo_capi || return 1; fi
  if [ -n "$nodes" ]; then _uo_nodes || return 1; fi
  if [ -n "$production" ]; then _uo_temporal_production || return 1; fi
}

_uo_main "$@"

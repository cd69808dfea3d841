# shellcheck shell=bash
# Helpers shared by the tool builders (scripts/tools-k8s.sh, scripts/tools-nodes.sh).
# Sourced, not run, after the sourcing script has set ROOT (the checkout) and TOOLS_LOG
# (its log prefix); sets CACHE and TOOLS (the tool cache and its tools/ directory).
# Progress goes to stderr.

CACHE="${CAPI_UO_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/capi-upgrade-orchestrator}"
TOOLS="$CACHE/tools"

log() { printf '[%s] %s\n' "$TOOLS_LOG" "$*" >&2; }
die() { printf '[%s] error: %s\n' "$TOOLS_LOG" "$*" >&2; exit 1; }

need_go() {
  command -v go >/dev/null 2>&1 ||
    die "'go' not found on PATH: install Go >= 1.26 (needed to build the Kubernetes tools from the Go module proxy)"
}

# on_path NAME VERSION_REGEX ARGS...: prints the PATH binary when `NAME ARGS` output matches.
on_path() {
  local name="$1" re="$2" bin out
  shift 2
  bin="$(command -v "$name" 2>/dev/null)" || return 1
  out="$("$bin" "$@" 2>&1 | head -n 3)" || return 1
  printf '%s' "$out" | grep -Eq "$re" || return 1
  printf '%s\n' "$bin"
}

mod_dir() { # mod_dir MODULE@VERSION: downloads a module, prints its directory
  local dir
  dir="$(cd "$TOOLS" && GOFLAGS='' go mod download -json "$1" |
    sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')"
  if [ -z "$dir" ] || [ ! -d "$dir" ]; then die "go mod download $1 gave no module directory"; fi
  printf '%s\n' "$dir"
}

timed() { # timed LABEL CMD...: runs CMD, logs the wall time
  local label="$1" start rc=0
  shift
  start=$(date +%s)
  "$@" || rc=$?
  if [ "$rc" -ne 0 ]; then
    log "$label failed after $(( $(date +%s) - start ))s"
    return "$rc"
  fi
  log "$label done in $(( $(date +%s) - start ))s"
}

q() { printf "'%s'" "${1//\'/\'\\\'\'}"; } # shell-quotes one word for the export lines

# gomod_require MODULE_DIR MODULE: the version MODULE_DIR/go.mod requires of MODULE.
gomod_require() {
  awk -v m="$2" '($1 == "require" && $2 == m) { print $3; exit } (($1 == m) && $2 ~ /^v/) { print $2; exit }' "$ROOT/$1/go.mod"
}

# kube_version MODULE_DIR: the k8s.io/kubernetes release a build module (tools/k8s,
# tools/k8s-target) requires, after checking that every k8s.io/* staging replace
# matches it (v1.X.Y -> v0.X.Y).
kube_version() {
  local version bad
  version="$(gomod_require "$1" k8s.io/kubernetes)"
  [ -n "$version" ] || die "cannot read the k8s.io/kubernetes version from $1/go.mod"
  bad="$(awk -v want="v0.${version#v1.}" '$2 == "=>" && $1 ~ /^k8s\.io\// && $4 != want { print $1 " " $4 }' "$ROOT/$1/go.mod")"
  [ -z "$bad" ] || die "$1/go.mod: replace versions do not match $version: $(printf '%s' "$bad" | tr '\n' ' ')"
  printf '%s\n' "$version"
}

# kube_build MODULE_DIR VERSION BINARY...: makes sure $TOOLS/kubernetes-VERSION/ holds
# each BINARY (kube-apiserver, kubeadm, kubelet, ...), building the missing ones from
# MODULE_DIR in one `go build`: static, stamped with the release (plain builds report
# v0.0.0-master, which kwokctl rejects and from which kubeadm would pick its image tags).
kube_build() {
  local module="$1" version="$2" dir="$TOOLS/kubernetes-$2" minor vars="" pkg b tmp
  shift 2
  local missing=()
  for b in "$@"; do [ -x "$dir/$b" ] || missing+=("$b"); done
  [ ${#missing[@]} -gt 0 ] || return 0
  (
    # tools-k8s.sh and tools-nodes.sh both fill this directory: one builds, the other waits.
    if command -v flock >/dev/null 2>&1; then flock 8; fi
    missing=()
    for b in "$@"; do [ -x "$dir/$b" ] || missing+=("$b"); done
    [ ${#missing[@]} -gt 0 ] || exit 0
    need_go
    minor="$(echo "$version" | cut -d. -f2)"
    for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
      vars+=" -X $pkg.gitVersion=$version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
    done
    local pkgs=()
    for b in "${missing[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$b"); done
    tmp="$(mktemp -d "$TOOLS/.kubernetes-$version.XXXXXX")"
    log "building Kubernetes $version: ${missing[*]} (cold: several minutes)"
    if ! timed "Kubernetes $version build" env CGO_ENABLED=0 go build -C "$ROOT/$module" -trimpath \
        -ldflags "-s -w$vars" -o "$tmp/" "${pkgs[@]}"; then
      rm -rf "$tmp"
      die "building Kubernetes $version failed (see the go output above)"
    fi
    mkdir -p "$dir"
    for b in "${missing[@]}"; do mv -f "$tmp/$b" "$dir/$b"; done
    rm -rf "$tmp"
  ) 8>"$TOOLS/.kubernetes-$version.lock" || exit 1
}

# cached_build DIR SPEC LABEL FUNC ARGS...: makes sure DIR holds what `FUNC OUT ARGS...`
# builds into a fresh directory OUT. DIR counts as built when its .complete marker
# holds SPEC (a line naming every input: version, tags, linker flags), so a changed
# input rebuilds. One caller builds at a time; the result is moved into place whole.
cached_build() {
  local dir="$1" spec="$2" label="$3" tmp hidden
  shift 3
  hidden="$(dirname "$dir")/.$(basename "$dir")"
  [ "$(cat "$dir/.complete" 2>/dev/null)" = "$spec" ] && return 0
  (
    if command -v flock >/dev/null 2>&1; then flock 8; fi
    [ "$(cat "$dir/.complete" 2>/dev/null)" = "$spec" ] && exit 0
    tmp="$(mktemp -d "$hidden.XXXXXX")"
    log "building $label"
    if ! timed "$label" "$@" "$tmp"; then
      rm -rf "$tmp"
      die "building $label failed (see the output above)"
    fi
    printf '%s\n' "$spec" >"$tmp/.complete"
    chmod 755 "$tmp" # mktemp's 700 would hide it from other users; what is inside keeps its modes
    rm -rf "$dir"
    mv "$tmp" "$dir"
  ) 8>"$hidden.lock" || exit 1
}

# etcd_build VERSION: makes sure $TOOLS/etcd-VERSION/etcd exists (static, from tools/etcd).
etcd_build() {
  local dir="$TOOLS/etcd-$1" tmp
  [ -x "$dir/etcd" ] && return 0
  (
    if command -v flock >/dev/null 2>&1; then flock 8; fi
    [ -x "$dir/etcd" ] && exit 0
    need_go
    tmp="$(mktemp -d "$TOOLS/.etcd-$1.XXXXXX")"
    log "building etcd $1"
    if ! timed "etcd build" env CGO_ENABLED=0 go build -C "$ROOT/tools/etcd" -trimpath \
        -ldflags "-s -w" -o "$tmp/etcd" go.etcd.io/etcd/server/v3; then
      rm -rf "$tmp"
      die "building etcd $1 failed (see the go output above)"
    fi
    mkdir -p "$dir"
    mv -f "$tmp/etcd" "$dir/etcd"
    rm -rf "$tmp"
  ) 8>"$TOOLS/.etcd-$1.lock" || exit 1
}

# tool_args "$@": the arguments every tool builder takes; sets ENV_FILE. --help prints
# the calling script's header comment.
tool_args() {
  ENV_FILE=""
  while [ $# -gt 0 ]; do
    case "$1" in
      --env-file) ENV_FILE="${2:?--env-file needs a path}"; shift 2 ;;
      --env-file=*) ENV_FILE="${1#*=}"; shift ;;
      ensure) shift ;;
      -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
      *) die "unknown argument: $1" ;;
    esac
  done
}

# print_exports LINES: the export lines on stdout, and into ENV_FILE when one was asked for.
print_exports() {
  if [ -n "$ENV_FILE" ]; then
    mkdir -p "$(dirname "$ENV_FILE")"
    printf '%s\n' "$1" >"$ENV_FILE"
  fi
  printf '%s\n' "$1"
}

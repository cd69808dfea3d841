#!/bin/sh
# upgrade-node.sh: upgrades Kubernetes on one node in place (kubeadm, then kubelet and kubectl).
SCRIPT_VERSION=3
#
# Run by the upgrade Job pinned to the node (busybox/alpine image, privileged, the host's
# root filesystem mounted at HOST_ROOT). POSIX sh; every host path it reads or writes is
# under HOST_ROOT; host commands (kubeadm, kubelet, systemctl, chown) run through `host`:
# `chroot "$HOST_ROOT" <cmd>` when HOST_ROOT is not / (the image needs chroot, and
# sha256sum, mktemp, curl or wget), plain `<cmd>` when it is /; $BIN_DIR comes first in
# their PATH either way. Bump SCRIPT_VERSION when this contract changes.
#
# Environment (inputs):
#   KUBERNETES_VERSION  required, ^v[0-9]+\.[0-9]+\.[0-9]+$ (e.g. v1.34.2)
#   NODE_NAME           required, the node being upgraded (used in logs)
#   UPGRADE_MODE        required: `apply` (first control-plane node of a minor:
#                       `kubeadm upgrade apply -y <version>`) or `node` (every other
#                       node, control plane or worker: `kubeadm upgrade node`)
#   HOST_ROOT           default `/`: where the host's root filesystem is mounted
#   BIN_DIR             default `/usr/bin`: host directory (under HOST_ROOT) holding
#                       kubeadm, kubelet and kubectl; first in PATH for host commands
#   KUBEADM_SHA256, KUBELET_SHA256, KUBECTL_SHA256
#                       required: the pinned hex sha256 of each binary for this version
#                       and ARCH (from the worker's configuration, never from the server
#                       that serves the binaries; a missing one exits 2 naming it)
#   BINARY_SOURCE       default `https://dl.k8s.io/release`; binaries are fetched from
#                       $BINARY_SOURCE/$KUBERNETES_VERSION/bin/linux/$ARCH/<name>. https://,
#                       or `file:///dir` (air-gapped: pre-staged in the image or a mounted
#                       volume, same layout; a path as the script sees it, NOT under
#                       HOST_ROOT). http:// only with BINARY_SOURCE_ALLOW_HTTP=1.
#   BINARY_SOURCE_ALLOW_HTTP
#                       `1` accepts an http:// BINARY_SOURCE; unset refuses it (exit 2)
#   ARCH                default from `uname -m` (x86_64->amd64, aarch64->arm64,
#                       ppc64le, s390x); one of amd64 arm64 ppc64le s390x
#   FILES_DIR           optional directory (a mounted Secret) holding files to write and
#                       FILES_DIR/manifest: one line per file, fields separated by single
#                       spaces, path last (it may contain spaces):
#                         <key> <mode> <owner> <absolute path>
#                       key: a file name in FILES_DIR; mode: octal (0600, 644, 0755);
#                       owner: user:group (resolved on the host) or `-` (no chown).
#                       Blank lines and lines starting with `#` are ignored.
#   IGNORE_PREFLIGHT_ERRORS
#                       optional: kubeadm preflight checks to ignore in `kubeadm upgrade`,
#                       comma-separated names ([A-Za-z0-9.-]+, e.g. SystemVerification on a
#                       cgroup v1 host) or `all`; passed as --ignore-preflight-errors
#   SANDBOX             unset in production. SANDBOX=1 (tests): host commands run without
#                       chroot, with $HOST_ROOT$BIN_DIR first in PATH (and host path
#                       arguments, e.g. chown's, are given as $HOST_ROOT/...).
#
# Steps (each logged on stdout with the prefix `[node-upgrade]`; the first line names
# SCRIPT_VERSION):
#   1. validate every input, the manifest included (exit 2 naming the bad variable/line)
#   2. download kubeadm, kubelet, kubectl into a temp dir under
#      $HOST_ROOT/var/lib/capi-upgrade-orchestrator/<version>/ (curl -fsSL, else wget -qO;
#      cp for file://), verify each against its pinned *_SHA256 with `sha256sum -c`,
#      chmod 0755. A checksum mismatch exits 1 naming the binary before anything on the
#      host has changed (the temp dir is removed).
#   3. install kubeadm: copy to a temp file in $HOST_ROOT$BIN_DIR, then mv (atomic)
#   4. write the manifest's files: temp file in the target directory (parents created),
#      chmod <mode>, chown <owner> on the host unless `-`, mv
#   5. `kubeadm upgrade apply -y <version>` (apply) or `kubeadm upgrade node` (node), on the host
#      (with --ignore-preflight-errors=$IGNORE_PREFLIGHT_ERRORS when set)
#   6. install kubelet and kubectl as in step 3
#   7. `systemctl daemon-reload`, `systemctl restart kubelet` on the host
#   8. check `kubelet --version` on the host prints `Kubernetes <version>` (else exit 1)
#   9. log `done`
# Errors go to stderr as `[node-upgrade] error: ...`, then `[node-upgrade] failed (exit N)`.
# Exit codes: 0 done; 2 bad input (nothing changed); 1 (or the failing command's status)
# any other failure. Idempotent: running it again re-downloads and re-runs kubeadm.
set -eu

log() { printf '[node-upgrade] %s\n' "$*"; }
die() { # die <exit code> <message...>
  _code=$1
  shift
  printf '[node-upgrade] error: %s\n' "$*" >&2
  exit "$_code"
}

log "upgrade-node.sh SCRIPT_VERSION=$SCRIPT_VERSION node=${NODE_NAME:-<unset>} version=${KUBERNETES_VERSION:-<unset>} mode=${UPGRADE_MODE:-<unset>}"

# Files to remove on exit: the download directory and the temp file being written, if any.
WORK=""
TMP=""
cleanup() {
  if [ -n "$TMP" ]; then rm -f "$TMP"; fi
  if [ -n "$WORK" ]; then
    rm -rf "$WORK"
    rmdir "${WORK%/*}" 2>/dev/null || true
  fi
}
on_exit() {
  _rc=$?
  trap - EXIT
  cleanup
  if [ "$_rc" -ne 0 ]; then log "failed (exit $_rc)"; fi
  exit "$_rc"
}
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---- 1. validate inputs ---------------------------------------------------------------------

log "validating inputs"
KUBERNETES_VERSION=${KUBERNETES_VERSION:-}
NODE_NAME=${NODE_NAME:-}
UPGRADE_MODE=${UPGRADE_MODE:-}
HOST_ROOT=${HOST_ROOT:-/}
BIN_DIR=${BIN_DIR:-/usr/bin}
BINARY_SOURCE=${BINARY_SOURCE:-https://dl.k8s.io/release}
BINARY_SOURCE_ALLOW_HTTP=${BINARY_SOURCE_ALLOW_HTTP:-}
KUBEADM_SHA256=${KUBEADM_SHA256:-}
KUBELET_SHA256=${KUBELET_SHA256:-}
KUBECTL_SHA256=${KUBECTL_SHA256:-}
FILES_DIR=${FILES_DIR:-}
IGNORE_PREFLIGHT_ERRORS=${IGNORE_PREFLIGHT_ERRORS:-}
SANDBOX=${SANDBOX:-}
ARCH=${ARCH:-}

is_uint() { case $1 in '' | *[!0-9]*) return 1 ;; *) return 0 ;; esac }
# An absolute path with no `..` component and no trailing slash.
is_safe_abs_path() {
  case $1 in
    /*) ;;
    *) return 1 ;;
  esac
  case $1 in
    */../* | */.. | */) return 1 ;;
  esac
  return 0
}

[ -n "$KUBERNETES_VERSION" ] || die 2 "KUBERNETES_VERSION is required (e.g. v1.34.2)"
_v=${KUBERNETES_VERSION#v}
_major=${_v%%.*}
_rest=${_v#*.}
_minor=${_rest%%.*}
_patch=${_rest#*.}
case $KUBERNETES_VERSION in
  v*.*.*) ;;
  *) die 2 "KUBERNETES_VERSION '$KUBERNETES_VERSION' is not of the form vMAJOR.MINOR.PATCH (e.g. v1.34.2)" ;;
esac
if ! is_uint "$_major" || ! is_uint "$_minor" || ! is_uint "$_patch"; then
  die 2 "KUBERNETES_VERSION '$KUBERNETES_VERSION' is not of the form vMAJOR.MINOR.PATCH (e.g. v1.34.2)"
fi
V=$KUBERNETES_VERSION

[ -n "$NODE_NAME" ] || die 2 "NODE_NAME is required"
case $UPGRADE_MODE in
  apply | node) ;;
  '') die 2 "UPGRADE_MODE is required (apply or node)" ;;
  *) die 2 "UPGRADE_MODE '$UPGRADE_MODE' is neither apply nor node" ;;
esac
# Names only: the value becomes one argument of kubeadm, never more.
case $IGNORE_PREFLIGHT_ERRORS in
  *[!A-Za-z0-9.,-]* | ,* | *, | *,,*)
    die 2 "IGNORE_PREFLIGHT_ERRORS '$IGNORE_PREFLIGHT_ERRORS' is not a comma-separated list of preflight check names" ;;
esac
case $SANDBOX in
  '' | 1) ;;
  *) die 2 "SANDBOX '$SANDBOX' must be unset or 1" ;;
esac

case $HOST_ROOT in
  /*) ;;
  *) die 2 "HOST_ROOT '$HOST_ROOT' is not an absolute path" ;;
esac
[ -d "$HOST_ROOT" ] || die 2 "HOST_ROOT '$HOST_ROOT' is not a directory"
# R prefixes host paths as this script sees them ("" when HOST_ROOT is /).
R=$HOST_ROOT
while [ "${R%/}" != "$R" ]; do R=${R%/}; done
is_safe_abs_path "$BIN_DIR" || die 2 "BIN_DIR '$BIN_DIR' is not an absolute path without '..'"

case $BINARY_SOURCE_ALLOW_HTTP in
  '' | 1) ;;
  *) die 2 "BINARY_SOURCE_ALLOW_HTTP '$BINARY_SOURCE_ALLOW_HTTP' must be unset or 1" ;;
esac
case $BINARY_SOURCE in
  https://*) BINARY_SOURCE=${BINARY_SOURCE%/} ;;
  http://*)
    [ "$BINARY_SOURCE_ALLOW_HTTP" = 1 ] ||
      die 2 "BINARY_SOURCE '$BINARY_SOURCE' is plain http: refused unless BINARY_SOURCE_ALLOW_HTTP=1"
    BINARY_SOURCE=${BINARY_SOURCE%/}
    ;;
  file:///*)
    BINARY_SOURCE=${BINARY_SOURCE%/}
    [ -d "${BINARY_SOURCE#file://}" ] || die 2 "BINARY_SOURCE '$BINARY_SOURCE': no such directory"
    ;;
  *) die 2 "BINARY_SOURCE '$BINARY_SOURCE' must start with https:// or file:/// (http:// on opt-in)" ;;
esac

if [ -z "$ARCH" ]; then
  _m=$(uname -m)
  case $_m in
    x86_64 | amd64) ARCH=amd64 ;;
    aarch64 | arm64) ARCH=arm64 ;;
    ppc64le) ARCH=ppc64le ;;
    s390x) ARCH=s390x ;;
    *) die 2 "cannot map machine type '$_m' (uname -m) to a Kubernetes ARCH: set ARCH" ;;
  esac
fi
case $ARCH in
  amd64 | arm64 | ppc64le | s390x) ;;
  *) die 2 "ARCH '$ARCH' is not one of amd64 arm64 ppc64le s390x" ;;
esac

# The pinned digest of binary $1 (from <NAME>_SHA256), lowercased; exits 2 when it is missing or malformed.
pinned_digest() {
  case $1 in
    kubeadm) _pd=$KUBEADM_SHA256 _pv=KUBEADM_SHA256 ;;
    kubelet) _pd=$KUBELET_SHA256 _pv=KUBELET_SHA256 ;;
    kubectl) _pd=$KUBECTL_SHA256 _pv=KUBECTL_SHA256 ;;
  esac
  [ -n "$_pd" ] || die 2 "$_pv is unset: no pinned sha256 for $1 $KUBERNETES_VERSION linux/$ARCH"
  _pd=$(printf '%s' "$_pd" | tr 'A-F' 'a-f')
  case $_pd in
    *[!0-9a-f]*) die 2 "$_pv is not a sha256 hex digest" ;;
  esac
  [ ${#_pd} -eq 64 ] || die 2 "$_pv is not a sha256 hex digest"
  printf '%s' "$_pd"
}
BINARIES="kubeadm kubelet kubectl"
for b in $BINARIES; do pinned_digest "$b" >/dev/null; done

# Parses one manifest line into M_KEY M_MODE M_OWNER M_PATH; returns 1 when malformed.
parse_manifest_line() {
  _l=$1
  case $_l in *' '*' '*' '*) ;; *) return 1 ;; esac
  M_KEY=${_l%% *}
  _l=${_l#* }
  M_MODE=${_l%% *}
  _l=${_l#* }
  M_OWNER=${_l%% *}
  M_PATH=${_l#* }
}
# Runs `$1 <line number> <line>` for each manifest entry (blank and # lines skipped).
for_each_manifest_line() {
  _n=0
  while IFS= read -r _line || [ -n "$_line" ]; do
    _n=$((_n + 1))
    case $_line in '' | '#'*) continue ;; esac
    "$1" "$_n" "$_line"
  done <"$FILES_DIR/manifest"
}
check_manifest_line() {
  _where="FILES_DIR manifest line $1"
  parse_manifest_line "$2" || die 2 "$_where: expected '<key> <mode> <owner> <absolute path>'"
  case $M_KEY in
    '' | . | .. | manifest | */*) die 2 "$_where: bad key '$M_KEY'" ;;
  esac
  [ -f "$FILES_DIR/$M_KEY" ] || die 2 "$_where: key '$M_KEY' is not a file in FILES_DIR"
  case $M_MODE in
    [0-7][0-7][0-7] | [0-7][0-7][0-7][0-7]) ;;
    *) die 2 "$_where: mode '$M_MODE' is not octal (e.g. 0600)" ;;
  esac
  case $M_OWNER in
    -) ;;
    :* | *: | *:*:* | *[!A-Za-z0-9._:-]*) die 2 "$_where: owner '$M_OWNER' is not user:group or -" ;;
    *:*) ;;
    *) die 2 "$_where: owner '$M_OWNER' is not user:group or -" ;;
  esac
  is_safe_abs_path "$M_PATH" || die 2 "$_where: path '$M_PATH' is not absolute or contains '..'"
}
if [ -n "$FILES_DIR" ]; then
  [ -d "$FILES_DIR" ] || die 2 "FILES_DIR '$FILES_DIR' is not a directory"
  [ -f "$FILES_DIR/manifest" ] || die 2 "FILES_DIR '$FILES_DIR' has no manifest"
  for_each_manifest_line check_manifest_line
fi

if [ -n "$SANDBOX" ]; then
  HOST_MODE=sandbox
elif [ -z "$R" ]; then
  HOST_MODE=direct
else
  HOST_MODE=chroot
fi
# HP prefixes a host path passed as an argument to a host command.
if [ "$HOST_MODE" = chroot ]; then HP=""; else HP=$R; fi

# Runs a command on the host, with $BIN_DIR first in PATH.
case $HOST_MODE in
  chroot) HOST_PATH="$BIN_DIR:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" ;;
  sandbox) HOST_PATH="$R$BIN_DIR:$PATH" ;;
  *) HOST_PATH="$BIN_DIR:$PATH" ;;
esac
host() {
  if [ "$HOST_MODE" = chroot ]; then
    env PATH="$HOST_PATH" chroot "$HOST_ROOT" "$@"
  else
    env PATH="$HOST_PATH" "$@"
  fi
}

log "node $NODE_NAME: upgrading to $V (mode $UPGRADE_MODE, arch $ARCH, host root $HOST_ROOT, host commands: $HOST_MODE)"

# ---- 2. download and verify -----------------------------------------------------------------

fetch() { # fetch <url> <dest>
  case $1 in
    file://*) cp "${1#file://}" "$2" ;;
    *)
      if command -v curl >/dev/null 2>&1; then
        curl -fsSL -o "$2" "$1"
      elif command -v wget >/dev/null 2>&1; then
        wget -qO "$2" "$1"
      else
        die 1 "neither curl nor wget is available to download $1"
      fi
      ;;
  esac
}

mkdir -p "$R/var/lib/capi-upgrade-orchestrator/$V"
WORK=$(mktemp -d "$R/var/lib/capi-upgrade-orchestrator/$V/download.XXXXXX")
BASE_URL="$BINARY_SOURCE/$V/bin/linux/$ARCH"
for b in $BINARIES; do
  _digest=$(pinned_digest "$b")
  log "downloading $b from $BASE_URL/$b"
  fetch "$BASE_URL/$b" "$WORK/$b" || die 1 "cannot download $b from $BASE_URL/$b"
  printf '%s  %s\n' "$_digest" "$b" >"$WORK/$b.check"
  if ! (cd "$WORK" && sha256sum -c "$b.check" >/dev/null 2>&1); then
    _actual=$(sha256sum "$WORK/$b")
    die 1 "checksum mismatch for $b: pinned $_digest, got ${_actual%% *}"
  fi
  chmod 0755 "$WORK/$b"
  log "verified $b (sha256 $_digest, pinned)"
done

# ---- install helpers ------------------------------------------------------------------------

# Atomically replaces the host's $BIN_DIR/<name> with the downloaded binary.
install_binary() {
  mkdir -p "$R$BIN_DIR"
  TMP=$(mktemp "$R$BIN_DIR/.$1.XXXXXX")
  cp "$WORK/$1" "$TMP"
  chmod 0755 "$TMP"
  mv -f "$TMP" "$R$BIN_DIR/$1"
  TMP=""
  log "installed $1 $V at $BIN_DIR/$1"
}

write_manifest_file() {
  parse_manifest_line "$2"
  _dir=${M_PATH%/*}
  _base=${M_PATH##*/}
  mkdir -p "$R$_dir"
  TMP=$(mktemp "$R$_dir/.$_base.XXXXXX")
  cat "$FILES_DIR/$M_KEY" >"$TMP"
  chmod "$M_MODE" "$TMP"
  if [ "$M_OWNER" != - ]; then
    host chown "$M_OWNER" "$HP${TMP#"$R"}" </dev/null
  fi
  mv -f "$TMP" "$R$M_PATH"
  TMP=""
  log "wrote $M_PATH (mode $M_MODE, owner $M_OWNER)"
}

# ---- 3. kubeadm -----------------------------------------------------------------------------

install_binary kubeadm

# ---- 4. files -------------------------------------------------------------------------------

if [ -n "$FILES_DIR" ]; then
  log "writing files from $FILES_DIR/manifest"
  for_each_manifest_line write_manifest_file
fi

# ---- 5. kubeadm upgrade ---------------------------------------------------------------------

set --
if [ -n "$IGNORE_PREFLIGHT_ERRORS" ]; then set -- "--ignore-preflight-errors=$IGNORE_PREFLIGHT_ERRORS"; fi
# kubeadm's own output is not quoted to CAPI (it may hold tokens): the error line names the command.
_rc=0
if [ "$UPGRADE_MODE" = apply ]; then
  log "kubeadm upgrade apply -y $V $* (first control-plane node)"
  host kubeadm upgrade apply -y "$V" "$@" || _rc=$?
  [ "$_rc" = 0 ] || die "$_rc" "kubeadm upgrade apply -y $V failed (exit $_rc); its output is in the Job's log"
else
  log "kubeadm upgrade node $*"
  host kubeadm upgrade node "$@" || _rc=$?
  [ "$_rc" = 0 ] || die "$_rc" "kubeadm upgrade node failed (exit $_rc); its output is in the Job's log"
fi

# ---- 6. kubelet and kubectl -----------------------------------------------------------------

install_binary kubelet
install_binary kubectl

# ---- 7. restart kubelet ---------------------------------------------------------------------

log "restarting kubelet"
host systemctl daemon-reload
host systemctl restart kubelet

# ---- 8. check -------------------------------------------------------------------------------

if ! _out=$(host kubelet --version 2>&1); then
  die 1 "kubelet --version failed: $_out"
fi
[ "$_out" = "Kubernetes $V" ] || die 1 "kubelet --version printed '$_out', expected 'Kubernetes $V'"
log "kubelet reports $_out"

# ---- 9. done --------------------------------------------------------------------------------

log "done"

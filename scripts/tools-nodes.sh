#!/usr/bin/env bash
# Ensures everything the real-node tier's nodes are made of exists in the tool
# cache, building what is missing (Go module proxy, Debian's packages), and
# prints its locations.
#
#   scripts/tools-nodes.sh                 # ensure, print `export VAR='path'` lines on stdout
#   scripts/tools-nodes.sh --env-file F    # ensure, also write the export lines to F
#   scripts/tools-nodes.sh --vm            # also a virtual machine's root (bench/vm-node.ts)
#   eval "$(scripts/tools-nodes.sh)"       # typical use
#
# Exported variables:
#   NODE_KUBE_FROM_VERSION, NODE_KUBE_FROM_DIR  the release nodes start at (tools/k8s/go.mod):
#       a directory with kubeadm, kubelet, kubectl, kube-apiserver,
#       kube-controller-manager, kube-scheduler, kube-proxy
#   NODE_KUBE_TO_VERSION, NODE_KUBE_TO_DIR      the release they are upgraded to
#       (tools/k8s-target/go.mod), the same seven binaries
#   NODE_ETCD_VERSION, NODE_ETCD_BINARY         etcd (tools/etcd/go.mod)
#   NODE_CONTAINERD_VERSION, NODE_CONTAINERD_DIR  containerd, containerd-shim-runc-v2, ctr
#   NODE_CRICTL_BINARY, NODE_PAUSE_BINARY (tools/pause, ours), REGISTRY_BINARY
#   NODE_ROOTFS_DIR  a Debian root file system (systemd, runc, CNI plugins, iptables,
#       conntrack, ...) without any Kubernetes or containerd binary, meant as the
#       read-only lower layer of each node's overlay
#   NODE_VM_ROOTFS_DIR  (--vm only) the same root plus a kernel and its initramfs in /boot,
#       udev and qemu-guest-agent: what a TCG virtual machine boots (bench/vm-node.ts)
# Every binary is static (CGO_ENABLED=0).
#
# Cache: ${CAPI_UO_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/capi-upgrade-orchestrator}/tools/<name>-<version>/
# The root file system needs root and mmdebstrap (installed from Debian's packages when missing).
# Progress goes to stderr; stdout carries only the export lines.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TOOLS_LOG=tools-nodes
# shellcheck source=scripts/tools-lib.sh
. "$ROOT/scripts/tools-lib.sh"

CONTAINERD_VERSION="v2.2.9"
CRICTL_VERSION="v1.37.0"
# Upstream's static-build tags. The btrfs snapshotter needs cgo: CGO_ENABLED=0 leaves it
# out already, no_btrfs says so; no other containerd package needs cgo.
CONTAINERD_TAGS="no_btrfs urfave_cli_no_docs osusergo netgo static_build"
NODE_SUITE="bookworm"
# What a kubeadm node needs of the distribution and systemd to run it: kubeadm's preflight
# requires losetup, mount and cp (and conntrack before 1.32); kubelet and kube-proxy use
# iptables, conntrack, nsenter, ip; runc starts the containers, the CNI plugins (in
# /usr/lib/cni, Debian's place) wire their network.
NODE_PACKAGES="systemd systemd-sysv dbus runc containernetworking-plugins conntrack socat iptables
iproute2 nftables ca-certificates procps util-linux mount kmod ethtool ebtables less"
# kube-proxy runs on the nodes of a cluster whose pods call Services (support/nodes/service-proxy.ts).
KUBE_BINARIES=(kube-apiserver kube-controller-manager kube-scheduler kubeadm kubelet kubectl kube-proxy)

VM=""
if [ "${1:-}" = --vm ]; then VM=1; shift; fi
tool_args "$@"

KUBE_FROM="$(kube_version tools/k8s)"
KUBE_TO="$(kube_version tools/k8s-target)"
ETCD_VERSION="$(gomod_require tools/etcd go.etcd.io/etcd/server/v3)"
REGISTRY_VERSION="$(gomod_require tools/registry github.com/distribution/distribution/v3)"
[ -n "$ETCD_VERSION" ] || die "cannot read the etcd version from tools/etcd/go.mod"
[ -n "$REGISTRY_VERSION" ] || die "cannot read the distribution version from tools/registry/go.mod"
PAUSE_KEY="$(cat "$ROOT/tools/pause/go.mod" "$ROOT/tools/pause/main.go" | sha256sum | cut -c1-12)"

mkdir -p "$TOOLS"
# Serialise concurrent callers so a cold build happens once.
if command -v flock >/dev/null 2>&1; then
  exec 9>"$TOOLS/.tools-nodes.lock"
  flock 9
fi

# --- Kubernetes: both releases, the binaries of a node and of its control plane ---

kube_build tools/k8s "$KUBE_FROM" "${KUBE_BINARIES[@]}"
kube_build tools/k8s-target "$KUBE_TO" "${KUBE_BINARIES[@]}"

# --- etcd (the one tools-k8s.sh builds for the test bed) ---------------------------

etcd_build "$ETCD_VERSION"

# --- containerd, crictl, registry, pause ----------------------------------------

go_install_to() { # go_install_to LDFLAGS TAGS PKG@VERSION... OUT: static `go install` into OUT
  local ldflags="$1" tags="$2" out="${*: -1}"
  shift 2
  need_go
  # `go install pkg@version` ignores any enclosing module; run it from the cache dir anyway.
  (cd "$TOOLS" && env CGO_ENABLED=0 GOBIN="$out" GOFLAGS='' \
    go install -trimpath -tags "$tags" -ldflags "-s -w $ldflags" "${@:1:$#-1}")
}

build_containerd() {
  local p=github.com/containerd/containerd/v2
  go_install_to "-X $p/version.Version=$CONTAINERD_VERSION -X $p/version.Package=$p" "$CONTAINERD_TAGS" \
    "$p/cmd/containerd@$CONTAINERD_VERSION" "$p/cmd/containerd-shim-runc-v2@$CONTAINERD_VERSION" \
    "$p/cmd/ctr@$CONTAINERD_VERSION" "$1"
}
CONTAINERD_DIR="$TOOLS/containerd-$CONTAINERD_VERSION"
cached_build "$CONTAINERD_DIR" "containerd $CONTAINERD_VERSION tags=$CONTAINERD_TAGS" \
  "containerd $CONTAINERD_VERSION" build_containerd

build_crictl() {
  go_install_to "-X sigs.k8s.io/cri-tools/pkg/version.Version=$CRICTL_VERSION" "" \
    "sigs.k8s.io/cri-tools/cmd/crictl@$CRICTL_VERSION" "$1"
}
CRICTL_DIR="$TOOLS/crictl-$CRICTL_VERSION"
cached_build "$CRICTL_DIR" "crictl $CRICTL_VERSION" "crictl $CRICTL_VERSION" build_crictl

build_registry() {
  need_go
  env CGO_ENABLED=0 go build -C "$ROOT/tools/registry" -trimpath \
    -ldflags "-s -w -X github.com/distribution/distribution/v3/version.version=$REGISTRY_VERSION" \
    -o "$1/registry" github.com/distribution/distribution/v3/cmd/registry
}
REGISTRY_DIR="$TOOLS/registry-$REGISTRY_VERSION"
cached_build "$REGISTRY_DIR" "registry $REGISTRY_VERSION" "registry $REGISTRY_VERSION" build_registry

# CoreDNS with kubeadm's plugins only (tools/coredns/main.go), once per kubeadm release:
# from.mod pins the version the starting release deploys, go.mod the target's.
COREDNS_FROM="$(awk '$1 == "require" && $2 == "github.com/coredns/coredns" { print $3 }' "$ROOT/tools/coredns/from.mod")"
COREDNS_TO="$(gomod_require tools/coredns github.com/coredns/coredns)"
{ [ -n "$COREDNS_FROM" ] && [ -n "$COREDNS_TO" ]; } || die "cannot read the CoreDNS versions from tools/coredns/{from.mod,go.mod}"
COREDNS_KEY="$(sha256sum <"$ROOT/tools/coredns/main.go" | cut -c1-8)"
build_coredns() { # build_coredns MODFILE OUT
  need_go
  env CGO_ENABLED=0 go build -C "$ROOT/tools/coredns" -modfile "$1" -trimpath -ldflags "-s -w" -o "$2/coredns" .
}
for _v in "from.mod:$COREDNS_FROM" "go.mod:$COREDNS_TO"; do
  cached_build "$TOOLS/coredns-${_v#*:}-$COREDNS_KEY" "coredns ${_v#*:} $COREDNS_KEY" "CoreDNS ${_v#*:}" \
    build_coredns "${_v%%:*}"
done

build_pause() {
  need_go
  env CGO_ENABLED=0 go build -C "$ROOT/tools/pause" -trimpath -ldflags "-s -w" -o "$1/pause" .
}
PAUSE_DIR="$TOOLS/pause-$PAUSE_KEY"
cached_build "$PAUSE_DIR" "pause $PAUSE_KEY" "pause" build_pause

# --- the nodes' Debian root file system ---------------------------------------------

need_mmdebstrap() {
  command -v mmdebstrap >/dev/null 2>&1 && return 0
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    log "installing mmdebstrap from Debian's packages"
    { DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends mmdebstrap >/dev/null 2>&1 ||
      { apt-get update -qq >/dev/null 2>&1 &&
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends mmdebstrap >/dev/null 2>&1; }; } ||
      die "apt-get install mmdebstrap failed"
  else
    die "mmdebstrap not found: the nodes' root file system is built with it, as root (Debian/Ubuntu: apt-get install mmdebstrap)"
  fi
}

# host_sources OUT: the host's apt sources for the node's suite, when the host runs that
# suite (its mirror is the one that answers here): deb822 stanzas to OUT.sources,
# one-line entries to OUT.list. Elsewhere mmdebstrap's default mirror is used.
host_sources() {
  local out="$1" f codename
  # shellcheck disable=SC1091 # the host's, read when present
  codename="$(. /etc/os-release 2>/dev/null && printf '%s' "${VERSION_CODENAME:-}")" || codename=""
  [ "$codename" = "$NODE_SUITE" ] || return 0
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    awk -v s="$NODE_SUITE" 'BEGIN { RS = ""; ORS = "\n\n" }
      { ok = 0
        if ($0 ~ /(^|\n)Enabled:[ \t]*no/) next
        n = split($0, lines, "\n")
        for (i = 1; i <= n; i++) if (lines[i] ~ /^Suites:/) {
          m = split(lines[i], w, /[ \t]+/)
          for (j = 2; j <= m; j++) if (w[j] == s || w[j] == s "-updates" || w[j] == s "-security") ok = 1
        }
        if (ok) print }' "$f" >>"$out.sources"
  done
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    # deb [options] URI SUITE COMPONENT...: the suite is the second word after the options.
    awk -v s="$NODE_SUITE" '$1 == "deb" { line = $0; sub(/^deb[ \t]+(\[[^]]*\][ \t]+)?/, "", line); split(line, w, /[ \t]+/)
      if (w[2] == s || w[2] == s "-updates" || w[2] == s "-security") print }' "$f" >>"$out.list"
  done
}

build_rootfs() {
  local out="$1" mirrors=() f
  [ "$(id -u)" = 0 ] || die "the nodes' root file system is built as root (mmdebstrap --mode=root); run as root"
  need_mmdebstrap
  host_sources "$out/sources"
  for f in "$out/sources.sources" "$out/sources.list"; do
    if [ -s "$f" ]; then mirrors+=("$f"); fi
  done
  # Generic: nothing of a particular node or release (binaries, containerd's and kubelet's
  # configuration, units) is baked in; the node host lays those over it. The hooks'
  # $1 is mmdebstrap's (the root file system being built).
  # shellcheck disable=SC2016
  mmdebstrap --mode=root --variant=minbase --quiet \
    --include="$(printf '%s' "$NODE_PACKAGES" | tr -s ' \n' ',')" \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-include=/usr/share/doc/*/copyright' --dpkgopt='path-exclude=/usr/share/locale/*' \
    --customize-hook='echo "net.ipv4.ip_forward = 1" >"$1/etc/sysctl.d/90-kubernetes.conf"' \
    --customize-hook='rm -f "$1/etc/hostname"; : >"$1/etc/machine-id"' \
    "$NODE_SUITE" "$out/rootfs" "${mirrors[@]}" >&2
  rm -f "$out/sources.sources" "$out/sources.list"
}
ROOTFS_KEY="$( { printf '%s\n' "$NODE_SUITE" "$NODE_PACKAGES"; declare -f build_rootfs host_sources; } | sha256sum | cut -c1-12)"
ROOTFS_DIR="$TOOLS/node-rootfs-$NODE_SUITE-$ROOTFS_KEY"
cached_build "$ROOTFS_DIR" "node-rootfs $NODE_SUITE $ROOTFS_KEY" "the nodes' $NODE_SUITE root file system" build_rootfs

# A virtual machine's root: the same packages, a kernel and its initramfs, udev (the
# guest agent's unit waits for its serial port's device) and qemu-guest-agent, through
# which the host runs commands in the guest without a network.
NODE_VM_PACKAGES="linux-image-amd64 udev qemu-guest-agent"
build_vm_rootfs() {
  NODE_PACKAGES="$NODE_PACKAGES $NODE_VM_PACKAGES" build_rootfs "$1"
}
if [ -n "$VM" ]; then
  VM_ROOTFS_KEY="$( { printf '%s\n' "$NODE_SUITE" "$NODE_PACKAGES" "$NODE_VM_PACKAGES"; declare -f build_rootfs host_sources build_vm_rootfs; } | sha256sum | cut -c1-12)"
  VM_ROOTFS_DIR="$TOOLS/node-vm-rootfs-$NODE_SUITE-$VM_ROOTFS_KEY"
  cached_build "$VM_ROOTFS_DIR" "node-vm-rootfs $NODE_SUITE $VM_ROOTFS_KEY" "a virtual machine's $NODE_SUITE root file system" build_vm_rootfs
fi

# --- output -------------------------------------------------------------------

out="$(
  echo "export NODE_KUBE_FROM_VERSION=$(q "$KUBE_FROM")"
  echo "export NODE_KUBE_FROM_DIR=$(q "$TOOLS/kubernetes-$KUBE_FROM")"
  echo "export NODE_KUBE_TO_VERSION=$(q "$KUBE_TO")"
  echo "export NODE_KUBE_TO_DIR=$(q "$TOOLS/kubernetes-$KUBE_TO")"
  echo "export NODE_ETCD_VERSION=$(q "$ETCD_VERSION")"
  echo "export NODE_ETCD_BINARY=$(q "$TOOLS/etcd-$ETCD_VERSION/etcd")"
  echo "export NODE_CONTAINERD_VERSION=$(q "$CONTAINERD_VERSION")"
  echo "export NODE_CONTAINERD_DIR=$(q "$CONTAINERD_DIR")"
  echo "export NODE_CRICTL_BINARY=$(q "$CRICTL_DIR/crictl")"
  echo "export NODE_PAUSE_BINARY=$(q "$PAUSE_DIR/pause")"
  echo "export REGISTRY_BINARY=$(q "$REGISTRY_DIR/registry")"
  echo "export NODE_ROOTFS_DIR=$(q "$ROOTFS_DIR/rootfs")"
  echo "export NODE_COREDNS_FROM_VERSION=$(q "$COREDNS_FROM")"
  echo "export NODE_COREDNS_FROM_BINARY=$(q "$TOOLS/coredns-$COREDNS_FROM-$COREDNS_KEY/coredns")"
  echo "export NODE_COREDNS_TO_VERSION=$(q "$COREDNS_TO")"
  echo "export NODE_COREDNS_TO_BINARY=$(q "$TOOLS/coredns-$COREDNS_TO-$COREDNS_KEY/coredns")"
  if [ -n "$VM" ]; then echo "export NODE_VM_ROOTFS_DIR=$(q "$VM_ROOTFS_DIR/rootfs")"; fi
)"
print_exports "$out"

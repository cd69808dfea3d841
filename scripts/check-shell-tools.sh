#!/usr/bin/env bash
# Every tool the docs and the banner of `make dev` name works from the shell a
# user has: after eval "$(make env)", node (24), temporal (stamped with its
# release, not 0.0.0-DEV), kubectl, clusterctl and capi-upgrades resolve and run.
# `make check-fresh` runs it in its fresh clone after `make test`; it runs alone too:
#   scripts/check-shell-tools.sh
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
fail() { printf '[check-shell-tools] %s\n' "$*" >&2; exit 1; }

# The user's shell: no tool cache on PATH, nothing a sourced scripts/env.sh exports.
PATH="$(printf '%s' "$PATH" | tr ':' '\n' | grep -v 'capi-upgrade-orchestrator' | paste -sd: -)"
unset TEMPORAL_CLI TCTL_CLI KUBECTL CLUSTERCTL_BINARY
exports=$(make -s --no-print-directory env) || fail "make env failed"
eval "$exports"
for tool in node temporal kubectl clusterctl capi-upgrades kubectl-capi_upgrades; do
  command -v "$tool" >/dev/null || fail "$tool is not on PATH after eval \"\$(make env)\" (make env printed: $exports)"
done
major=$(node -p 'process.versions.node.split(".")[0]')
[ "$major" -ge 24 ] || fail "node on PATH is $(node --version), not 24"
want=$(sed -n 's/^TEMPORAL_CLI_VERSION=v//p' scripts/env.sh)
version=$(temporal --version)
case "$version" in "temporal version $want "*) ;; *) fail "temporal --version: $version (want $want)" ;; esac
kubectl version --client >/dev/null || fail "kubectl version --client failed"
clusterctl version >/dev/null || fail "clusterctl version failed"
capi-upgrades --help | grep -q '^usage: capi-upgrades' || fail "capi-upgrades --help printed no usage"
printf '[check-shell-tools] ok: %s; node %s; %s\n' "$(command -v temporal kubectl clusterctl capi-upgrades | paste -sd' ' -)" \
  "$(node --version)" "$version" >&2

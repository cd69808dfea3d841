#!/usr/bin/env bash
# `make check-fresh`: the README's test command as a new machine runs it. A
# fresh clone of HEAD (commit first: uncommitted changes are not in it), with
# an empty tool cache and an empty Go module cache, runs the bootstrap and
# `make test`. Only Go's build cache stays warm (it holds compiled objects,
# never a downloaded module), so a missing install step cannot hide behind
# what an earlier run left on this machine. Then every tool the docs name must
# run from the user's shell after eval "$(make env)" (scripts/check-shell-tools.sh).
#   scripts/check-fresh.sh            # prints the elapsed time at the end
#   KEEP_FRESH_DIR=1 scripts/check-fresh.sh  # keep the clone and caches to look at
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
work="$(mktemp -d "${TMPDIR:-/tmp}/capi-uo-fresh.XXXXXX")"
# shellcheck disable=SC2317 # run by the EXIT trap
cleanup() {
  if [ -n "${KEEP_FRESH_DIR:-}" ]; then
    printf '[check-fresh] kept %s\n' "$work" >&2
    return
  fi
  # The module cache is read-only by design.
  chmod -R u+w "$work" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

git clone -q "$ROOT" "$work/repo"
printf '[check-fresh] %s at %s; caches under %s\n' "$work/repo" "$(git -C "$work/repo" rev-parse --short HEAD)" "$work" >&2
start=$SECONDS
# env -u: nothing the calling shell found (a sourced env.sh, a temporal on
# PATH) may stand in for the bootstrap. HOME stays: npm's own download cache
# is the registry's copy, not an install step.
rc=0
# Go's build cache sits under XDG_CACHE_HOME unless named: name it, so that
# emptying the tool cache does not empty it too.
gocache="$(go env GOCACHE)"
(
  cd "$work/repo"
  env -u CAPI_UO_CACHE -u TEMPORAL_CLI -u TCTL_CLI -u TEMPORAL_SERVER_BIN -u TEMPORAL_SQL_TOOL -u POSTGRES_BIN_DIR -u GOFLAGS \
    XDG_CACHE_HOME="$work/cache" GOCACHE="$gocache" GOMODCACHE="$work/gomod" GOPATH="$work/gopath" \
    PATH="$(printf '%s' "$PATH" | tr ':' '\n' | grep -v 'capi-upgrade-orchestrator' | paste -sd: -)" \
    bash -c 'make test && scripts/check-shell-tools.sh'
) || rc=$?
elapsed=$((SECONDS - start))
printf '[check-fresh] make test from a fresh clone with empty caches: exit %d after %dm%02ds\n' \
  "$rc" $((elapsed / 60)) $((elapsed % 60)) >&2
exit "$rc"

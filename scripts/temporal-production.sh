#!/usr/bin/env bash
# Production-shaped Temporal on loopback: the Temporal server's four services
# (frontend, history, matching, worker) as separate processes on PostgreSQL 15,
# with SQL advanced visibility (search attributes work), built by
# scripts/env.sh (`source scripts/env.sh --temporal-production`: go install of the server and its SQL tool).
#
#   scripts/temporal-production.sh up <statedir>     start it, write <statedir>/temporal.json
#   scripts/temporal-production.sh down <statedir>   stop it (safe to repeat, and after a partial up)
#   scripts/temporal-production.sh restart <statedir> <service>  start a killed service again (same config)
#
# temporal.json: {"address","namespace","metricsUrls":{service:url},"pids":{service:pid, "postgres":pid}}.
# Everything lives in <statedir>: pg/ (data, socket, log), <service>/ (config, log, pid).
#
# Environment (all optional):
#   TEMPORAL_PRODUCTION_NAMESPACE   namespace to create (default: default)
#   TEMPORAL_PRODUCTION_SHARDS      history shards (default: 4; production uses 512 and more)
#   TEMPORAL_PRODUCTION_FRONTEND_PORT  frontend gRPC port (default: a free one)
#   TEMPORAL_PRODUCTION_TIMEOUT     seconds to wait for each step (default: 120)
# Needs TEMPORAL_SERVER_BIN, TEMPORAL_SQL_TOOL, POSTGRES_BIN_DIR and TEMPORAL_CLI (env.sh exports them).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

log() { printf '[temporal-production] %s\n' "$*" >&2; }
die() { printf '[temporal-production] error: %s\n' "$*" >&2; exit 1; }
usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}" >&2; exit 2; }

[ $# -ge 2 ] || usage
case "$1" in
  up) [ $# -eq 2 ] || usage; mkdir -p "$2" ;;
  down) [ $# -eq 2 ] || usage; [ -d "$2" ] || { log "nothing to tear down in $2"; exit 0; } ;;
  restart) [ $# -eq 3 ] || usage; [ -f "$2/$3/config/production.yaml" ] || die "no service $3 in $2" ;;
  *) usage ;;
esac
cmd="$1"
STATE="$(cd "$2" && pwd)"
SERVICES=(frontend history matching worker)
NAMESPACE="${TEMPORAL_PRODUCTION_NAMESPACE:-default}"
SHARDS="${TEMPORAL_PRODUCTION_SHARDS:-4}"
TIMEOUT="${TEMPORAL_PRODUCTION_TIMEOUT:-120}"
PGDATA="$STATE/pg/data"
PGSOCK="$STATE/pg/socket"

# PostgreSQL refuses to run as root: then it runs as the `postgres` user the
# Debian package creates, which must be able to reach its directory.
as_pg() {
  # From /: the caller's directory may be closed to the postgres user.
  if [ "$(id -u)" = 0 ]; then (cd / && runuser -u postgres -- "$@"); else "$@"; fi
}

pid_alive() { [ -n "${1:-}" ] && kill -0 "$1" 2>/dev/null; }

stop_pid() { # pidfile
  local pid
  [ -f "$1" ] || return 0
  pid="$(cat "$1")"
  if pid_alive "$pid"; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do pid_alive "$pid" || break; sleep 0.2; done
    if pid_alive "$pid"; then kill -KILL "$pid" 2>/dev/null || true; fi
  fi
  rm -f "$1"
}

down() {
  local svc
  # The services first (they hold connections), then PostgreSQL.
  for svc in "${SERVICES[@]}"; do stop_pid "$STATE/$svc/pid"; done
  # A service started by hand or left by a killed `up` still names this state dir.
  if command -v pgrep >/dev/null 2>&1; then
    pgrep -f -- "--root $STATE/" | while read -r pid; do kill -KILL "$pid" 2>/dev/null || true; done || true
  fi
  if [ -f "$PGDATA/postmaster.pid" ]; then
    as_pg "$POSTGRES_BIN_DIR/pg_ctl" -D "$PGDATA" -m immediate -w -t 30 stop >/dev/null 2>&1 || true
  fi
  # A postmaster whose pid file is gone (or that would not stop) is found by its data dir.
  if command -v pgrep >/dev/null 2>&1; then
    pgrep -f -- "postgres -D $PGDATA " | while read -r pid; do kill -KILL "$pid" 2>/dev/null || true; done || true
  fi
  return 0
}

if [ "$cmd" = down ]; then
  : "${POSTGRES_BIN_DIR:=$(dirname "$(command -v pg_ctl || echo /usr/lib/postgresql/15/bin/pg_ctl)")}"
  down
  log "stopped ($STATE)"
  exit 0
fi

for v in TEMPORAL_SERVER_BIN TEMPORAL_SQL_TOOL POSTGRES_BIN_DIR TEMPORAL_CLI; do
  [ -n "${!v:-}" ] || die "$v is not set: source scripts/env.sh --temporal-production first"
done

launch() { # service: its config is already written
  local svc=$1 dir="$STATE/$1"
  # setsid: the service outlives this script (the caller stops it with `down`);
  # --root names the state dir, which is how `down` finds strays.
  setsid "$TEMPORAL_SERVER_BIN" --root "$STATE/" --config "$svc/config" --env production --allow-no-auth \
    start --service "$svc" >"$dir/log" 2>&1 </dev/null &
  echo $! >"$dir/pid"
}

write_state() {
  local sep="" svc
  {
    printf '{"address":"%s","namespace":"%s","metricsUrls":{' "$ADDRESS" "$NAMESPACE"
    for svc in "${SERVICES[@]}"; do
      printf '%s"%s":"http://127.0.0.1:%s/metrics"' "$sep" "$svc" "$(metrics_port "$svc")"
      sep=","
    done
    printf '},"pids":{"postgres":%s' "$(head -1 "$PGDATA/postmaster.pid")"
    for svc in "${SERVICES[@]}"; do printf ',"%s":%s' "$svc" "$(cat "$STATE/$svc/pid")"; done
    printf '}}\n'
  } >"$STATE/temporal.json.tmp"
  mv "$STATE/temporal.json.tmp" "$STATE/temporal.json"
}
metrics_port() { sed -n 's/.*listenAddress: "127.0.0.1:\([0-9]*\)".*/\1/p' "$STATE/$1/config/production.yaml"; }

if [ "$cmd" = restart ]; then
  svc="$3"
  stop_pid "$STATE/$svc/pid"
  ADDRESS="$(sed -n 's/.*"address":"\([^"]*\)".*/\1/p' "$STATE/temporal.json")"
  NAMESPACE="$(sed -n 's/.*"namespace":"\([^"]*\)".*/\1/p' "$STATE/temporal.json")"
  launch "$svc"
  write_state
  log "restarted $svc (pid $(cat "$STATE/$svc/pid"))"
  exit 0
fi


# A partial `up` must not leave processes behind.
on_exit() {
  local rc=$?
  if [ $rc -ne 0 ]; then log "up failed: stopping what started"; down; fi
}
trap on_exit EXIT

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
# Ten consecutive free ports: PostgreSQL, then gRPC + membership per service, the
# frontend's HTTP API, and one metrics port per service (base+10..13).
pick_base() {
  local base i ok
  for _ in $(seq 1 50); do
    # Below 32768: the membership table stores ports as a SQL smallint.
    base=$((20000 + (RANDOM % 600) * 20))
    ok=1
    for i in $(seq 0 13); do port_free $((base + i)) || { ok=0; break; }; done
    [ $ok = 1 ] && { echo "$base"; return 0; }
  done
  return 1
}
BASE="$(pick_base)" || die "no free loopback ports found"
PGPORT=$BASE
declare -A GRPC=([frontend]="${TEMPORAL_PRODUCTION_FRONTEND_PORT:-$((BASE + 1))}" [history]=$((BASE + 2)) [matching]=$((BASE + 3)) [worker]=$((BASE + 4)))
declare -A MEMBER=([frontend]=$((BASE + 5)) [history]=$((BASE + 6)) [matching]=$((BASE + 7)) [worker]=$((BASE + 8)))
HTTP_PORT=$((BASE + 9))
declare -A METRICS=([frontend]=$((BASE + 10)) [history]=$((BASE + 11)) [matching]=$((BASE + 12)) [worker]=$((BASE + 13)))

# --- PostgreSQL ---------------------------------------------------------------
mkdir -p "$STATE/pg" "$PGSOCK"
if [ "$(id -u)" = 0 ]; then
  # Let the postgres user reach the state dir (every parent needs search permission).
  d="$STATE"
  while [ "$d" != / ]; do chmod o+x "$d" 2>/dev/null || true; d="$(dirname "$d")"; done
  chown -R postgres: "$STATE/pg"
fi
if [ ! -f "$PGDATA/PG_VERSION" ]; then
  log "initdb PostgreSQL in $PGDATA"
  as_pg "$POSTGRES_BIN_DIR/initdb" -D "$PGDATA" -U temporal -A trust -E UTF8 --no-sync >"$STATE/pg/initdb.log" 2>&1 ||
    die "initdb failed; see $STATE/pg/initdb.log"
fi
# Loopback only; fsync off: a test bed's data is thrown away, and the shape
# (a SQL store with real transactions and SQL visibility) is what is tested.
as_pg "$POSTGRES_BIN_DIR/pg_ctl" -D "$PGDATA" -l "$STATE/pg/postgres.log" -w -t "$TIMEOUT" \
  -o "-p $PGPORT -k $PGSOCK -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200" \
  start >/dev/null || die "PostgreSQL did not start; see $STATE/pg/postgres.log"

sql_tool() { # database args...
  local db=$1
  shift
  "$TEMPORAL_SQL_TOOL" --plugin postgres12 --ep 127.0.0.1 -p "$PGPORT" -u temporal --pw temporal --db "$db" "$@" \
    >>"$STATE/pg/schema.log" 2>&1
}
log "schemas: temporal and temporal_visibility (temporal-sql-tool)"
for db in temporal temporal_visibility; do
  schema=temporal
  [ "$db" = temporal_visibility ] && schema=visibility
  sql_tool "$db" create-database || die "create-database $db failed; see $STATE/pg/schema.log"
  sql_tool "$db" setup-schema -v 0.0 || die "setup-schema $db failed; see $STATE/pg/schema.log"
  sql_tool "$db" update-schema --schema-name "postgresql/v12/$schema" || die "update-schema $db failed; see $STATE/pg/schema.log"
done

# --- Temporal services --------------------------------------------------------
write_config() { # service
  local svc=$1 dir="$STATE/$1" s
  mkdir -p "$dir/config"
  cp "$ROOT/scripts/temporal-dynamicconfig.yaml" "$dir/config/dynamicconfig.yaml"
  {
    cat <<EOF
log:
  stdout: true
  level: warn
persistence:
  defaultStore: postgres-default
  visibilityStore: postgres-visibility
  numHistoryShards: $SHARDS
  datastores:
    postgres-default:
      sql:
        pluginName: postgres12
        databaseName: temporal
        connectAddr: "127.0.0.1:$PGPORT"
        connectProtocol: tcp
        user: temporal
        password: temporal
        maxConns: 20
        maxIdleConns: 20
        maxConnLifetime: 1h
    postgres-visibility:
      sql:
        pluginName: postgres12
        databaseName: temporal_visibility
        connectAddr: "127.0.0.1:$PGPORT"
        connectProtocol: tcp
        user: temporal
        password: temporal
        maxConns: 10
        maxIdleConns: 10
        maxConnLifetime: 1h
global:
  membership:
    maxJoinDuration: 30s
    broadcastAddress: "127.0.0.1"
  metrics:
    prometheus:
      framework: tally
      timerType: histogram
      listenAddress: "127.0.0.1:${METRICS[$svc]}"
services:
EOF
    for s in "${SERVICES[@]}"; do
      printf '  %s:\n    rpc:\n      grpcPort: %s\n      membershipPort: %s\n      bindOnLocalHost: true\n' \
        "$s" "${GRPC[$s]}" "${MEMBER[$s]}"
      [ "$s" = frontend ] && printf '      httpPort: %s\n' "$HTTP_PORT"
    done
    cat <<EOF
clusterMetadata:
  enableGlobalNamespace: false
  failoverVersionIncrement: 10
  masterClusterName: active
  currentClusterName: active
  clusterInformation:
    active:
      enabled: true
      initialFailoverVersion: 1
      rpcName: frontend
      rpcAddress: "127.0.0.1:${GRPC[frontend]}"
dcRedirectionPolicy:
  policy: noop
dynamicConfigClient:
  filepath: "$dir/config/dynamicconfig.yaml"
  pollInterval: 10s
EOF
  } >"$dir/config/production.yaml"
}


log "starting ${SERVICES[*]} (history shards: $SHARDS)"
for svc in "${SERVICES[@]}"; do write_config "$svc"; done
# The frontend first, alone: each service writes the cluster's metadata on its first start, and
# on an empty database two at once race (the loser exits with "SaveClusterMetadata encountered
# version mismatch"). Once the frontend answers, the metadata is there and the rest only read it.
launch frontend

ADDRESS="127.0.0.1:${GRPC[frontend]}"
deadline=$((SECONDS + TIMEOUT))
until "$TEMPORAL_CLI" operator cluster health --address "$ADDRESS" >/dev/null 2>&1; do
  pid_alive "$(cat "$STATE/frontend/pid")" || die "the frontend service exited; see $STATE/frontend/log"
  [ $SECONDS -lt $deadline ] || die "the frontend did not answer on $ADDRESS within ${TIMEOUT}s; see $STATE/frontend/log"
  sleep 0.5
done
for svc in "${SERVICES[@]}"; do [ "$svc" = frontend ] || launch "$svc"; done

# The extension registers its search attributes itself when it starts
# (src/temporal-setup.ts), as on any Temporal server; only the namespace is made here.
log "namespace $NAMESPACE"
until "$TEMPORAL_CLI" operator namespace describe --address "$ADDRESS" --namespace "$NAMESPACE" >/dev/null 2>&1; do
  "$TEMPORAL_CLI" operator namespace create --address "$ADDRESS" --namespace "$NAMESPACE" --retention 72h \
    >>"$STATE/frontend/setup.log" 2>&1 || true
  [ $SECONDS -lt $deadline ] || die "namespace $NAMESPACE could not be created; see $STATE/frontend/setup.log"
  sleep 1
done

# The frontend answers health checks whatever the other services do: a service that exited on
# start would otherwise be found only by the first workflow that needs it.
for svc in "${SERVICES[@]}"; do
  pid_alive "$(cat "$STATE/$svc/pid")" || die "the $svc service exited; see $STATE/$svc/log"
done

write_state
trap - EXIT
log "up: frontend $ADDRESS, namespace $NAMESPACE, PostgreSQL 127.0.0.1:$PGPORT ($STATE)"

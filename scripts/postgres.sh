#!/usr/bin/env bash
# A private PostgreSQL cluster for tests and local runs (not for production).
#
#   scripts/postgres.sh start   install Debian's postgresql if missing, create the cluster
#                               once, start it if stopped; prints the superuser URL
#   scripts/postgres.sh stop    stop the cluster (keeps its data)
#   scripts/postgres.sh url     print the superuser URL
#   scripts/postgres.sh status  exit 0 when the cluster accepts connections
#
# The cluster listens on 127.0.0.1 only, on a fixed non-default port, with trust auth for
# localhost, owned by the `postgres` user. Idempotent and safe to run concurrently (a lock
# serialises starts). Environment: ASSAY_PG_PORT (54329), ASSAY_PG_ROOT (/var/lib/assay-pg).
set -euo pipefail

PORT="${ASSAY_PG_PORT:-54329}"
ROOT="${ASSAY_PG_ROOT:-/var/lib/assay-pg}"
DATA="$ROOT/data"
RUN="$ROOT/run"
LOG="$ROOT/postgres.log"
URL="postgresql+psycopg://postgres@127.0.0.1:${PORT}/postgres"

log() { echo "postgres.sh: $*" >&2; }

pg_bindir() {
  local dir
  dir="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)"
  [[ -n "$dir" && -x "$dir/initdb" ]] && echo "$dir"
}

as_owner() {
  # The server refuses to run as root: run its tools as the postgres user.
  if [[ "$(id -u)" == 0 ]]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

ensure_installed() {
  if [[ -z "$(pg_bindir)" ]]; then
    [[ "$(id -u)" == 0 ]] || { log "postgresql is not installed and installing needs root"; exit 1; }
    log "installing Debian's postgresql"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y postgresql >&2 || { apt-get update >&2 && apt-get install -y postgresql >&2; }
  fi
  # Debian's package may start its own cluster on 5432; it is not ours, leave it alone.
}

is_ready() {
  "$(pg_bindir)/pg_isready" -q -h 127.0.0.1 -p "$PORT" -U postgres
}

start() {
  ensure_installed
  local bin
  bin="$(pg_bindir)"
  if is_ready; then echo "$URL"; return 0; fi
  mkdir -p "$ROOT"
  exec 9>"$ROOT.lock"
  flock -w 120 9 || { log "timed out waiting for $ROOT.lock"; exit 1; }
  if [[ "$(id -u)" == 0 ]]; then
    chown postgres:postgres "$ROOT"
  fi
  if [[ ! -s "$DATA/PG_VERSION" ]]; then
    log "creating cluster in $DATA"
    as_owner mkdir -p "$DATA" "$RUN"
    as_owner "$bin/initdb" -D "$DATA" -U postgres --auth=trust --encoding=UTF8 --locale=C.UTF-8 >&2
  fi
  as_owner mkdir -p "$RUN"
  # The log must belong to the server's user: pg_ctl -l writes it as that user, and a
  # file a root shell's redirect created (or an earlier run left) would refuse it.
  [[ -e "$LOG" ]] || as_owner touch "$LOG"
  [[ "$(id -u)" == 0 ]] && chown postgres:postgres "$LOG"
  if ! is_ready; then
    # A stale pid file from a killed server blocks a start; pg_ctl status tells.
    if ! as_owner "$bin/pg_ctl" -D "$DATA" status >/dev/null 2>&1; then
      rm -f "$DATA/postmaster.pid"
    fi
    # The server must not inherit the lock (fd 9) or the caller's pipes: it outlives us.
    as_owner "$bin/pg_ctl" -D "$DATA" -l "$LOG" -w -t 60 start \
      -o "-p $PORT -c listen_addresses=127.0.0.1 -k $RUN -c max_connections=200 -c fsync=off" \
      9>&- </dev/null >/dev/null 2>&1
  fi
  exec 9>&-
  for _ in $(seq 1 60); do
    is_ready && { echo "$URL"; return 0; }
    sleep 0.5
  done
  log "server did not become ready; see $LOG"
  exit 1
}

stop() {
  local bin
  bin="$(pg_bindir)" || exit 0
  [[ -s "$DATA/PG_VERSION" ]] || exit 0
  as_owner "$bin/pg_ctl" -D "$DATA" -m fast -w stop >&2 || true
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  url) echo "$URL" ;;
  status) is_ready ;;
  *) echo "usage: $0 start|stop|url|status" >&2; exit 2 ;;
esac

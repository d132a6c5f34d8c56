#!/bin/sh
# Initialise the data directory on first start (an empty named volume), then run the
# server as the postgres user. The password comes from POSTGRES_PASSWORD_FILE; when that
# file does not exist yet and ASSAY_GENERATE_PASSWORD=1, a random one is written there
# first (a volume shared read-only with the API), so no password is ever in an image,
# the compose file or the environment.
set -eu
PGBIN=/usr/local/lib/pgbin
PGDATA="${PGDATA:-/var/lib/postgresql/data}"
POSTGRES_USER="${POSTGRES_USER:-postgres}"
POSTGRES_DB="${POSTGRES_DB:-$POSTGRES_USER}"
as_postgres() { setpriv --reuid=postgres --regid=postgres --init-groups "$@"; }

if [ "${1:-postgres}" != "postgres" ]; then
    exec "$@"
fi

password=""
if [ -n "${POSTGRES_PASSWORD_FILE:-}" ]; then
    if [ ! -s "$POSTGRES_PASSWORD_FILE" ] && [ "${ASSAY_GENERATE_PASSWORD:-0}" = "1" ]; then
        umask 077
        mkdir -p "$(dirname "$POSTGRES_PASSWORD_FILE")"
        head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$POSTGRES_PASSWORD_FILE.tmp"
        # Readable by the API container's user only through the shared volume.
        chmod 0444 "$POSTGRES_PASSWORD_FILE.tmp"
        mv "$POSTGRES_PASSWORD_FILE.tmp" "$POSTGRES_PASSWORD_FILE"
    fi
    password="$(cat "$POSTGRES_PASSWORD_FILE")"
elif [ -n "${POSTGRES_PASSWORD:-}" ]; then
    password="$POSTGRES_PASSWORD"
fi
if [ -z "$password" ]; then
    echo "postgres: no password (set POSTGRES_PASSWORD_FILE or POSTGRES_PASSWORD)" >&2
    exit 1
fi

mkdir -p "$PGDATA" /var/run/postgresql
chown postgres:postgres "$PGDATA" /var/run/postgresql
chmod 0700 "$PGDATA"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
    pwfile="$(mktemp)"
    printf '%s\n' "$password" >"$pwfile"
    chown postgres "$pwfile"
    as_postgres "$PGBIN/initdb" -D "$PGDATA" -U "$POSTGRES_USER" --pwfile="$pwfile" \
        --auth-local=scram-sha-256 --auth-host=scram-sha-256 --encoding=UTF8 --locale=C.UTF-8 >/dev/null
    rm -f "$pwfile"
    {
        echo "listen_addresses = '*'"
        echo "unix_socket_directories = '/var/run/postgresql'"
    } >>"$PGDATA/postgresql.conf"
    echo "host all all all scram-sha-256" >>"$PGDATA/pg_hba.conf"
    if [ "$POSTGRES_DB" != "postgres" ]; then
        as_postgres "$PGBIN/postgres" --single -D "$PGDATA" -j postgres >/dev/null <<SQL
CREATE DATABASE "$POSTGRES_DB" OWNER "$POSTGRES_USER";
SQL
    fi
fi
exec setpriv --reuid=postgres --regid=postgres --init-groups "$PGBIN/postgres" -D "$PGDATA"

#!/bin/sh
# Initialise the data directory on first start (an empty named volume), then run the
# server as the postgres user. The password comes from POSTGRES_PASSWORD_FILE; when that
# file does not exist yet and ASSAY_GENERATE_PASSWORD=1, a random one is written there
# first (a volume shared read-only with the API), so no password is ever in an image,
# the compose file or the environment.
#
# With ASSAY_APP_USER and ASSAY_APP_PASSWORD_FILE, a second login role (no superuser, no
# ownership) is made on every start if missing, its password generated the same way: the
# role the API connects as. `assay db upgrade --service-role` grants it what it may do.
set -eu
PGBIN=/usr/local/lib/pgbin
PGDATA="${PGDATA:-/var/lib/postgresql/data}"
POSTGRES_USER="${POSTGRES_USER:-postgres}"
POSTGRES_DB="${POSTGRES_DB:-$POSTGRES_USER}"
as_postgres() { setpriv --reuid=postgres --regid=postgres --init-groups "$@"; }

if [ "${1:-postgres}" != "postgres" ]; then
    exec "$@"
fi

# A random password in $1 unless it exists (ASSAY_GENERATE_PASSWORD=1).
generate_password() {
    if [ ! -s "$1" ] && [ "${ASSAY_GENERATE_PASSWORD:-0}" = "1" ]; then
        (
            umask 077
            mkdir -p "$(dirname "$1")"
            head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$1.tmp"
            # Readable only by the containers that mount its volume.
            chmod 0444 "$1.tmp"
            mv "$1.tmp" "$1"
        )
    fi
}

password=""
if [ -n "${POSTGRES_PASSWORD_FILE:-}" ]; then
    generate_password "$POSTGRES_PASSWORD_FILE"
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
if [ -n "${ASSAY_APP_USER:-}" ] && [ -n "${ASSAY_APP_PASSWORD_FILE:-}" ]; then
    generate_password "$ASSAY_APP_PASSWORD_FILE"
    app_password="$(cat "$ASSAY_APP_PASSWORD_FILE")"
    # Single-user mode (-j): statements end with `;` and a blank line; the password never sits in argv.
    as_postgres "$PGBIN/postgres" --single -D "$PGDATA" -j "$POSTGRES_DB" >/dev/null <<SQL
DO \$\$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '$ASSAY_APP_USER') THEN CREATE ROLE "$ASSAY_APP_USER" LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOBYPASSRLS; END IF; END \$\$;

ALTER ROLE "$ASSAY_APP_USER" PASSWORD '$app_password';
SQL
fi
exec setpriv --reuid=postgres --regid=postgres --init-groups "$PGBIN/postgres" -D "$PGDATA"

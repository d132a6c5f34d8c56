#!/bin/sh
# Build ASSAY_DATABASE_URL from parts when it is not given whole, reading the password
# from a secret file so that it never sits in the compose file, the image or `docker
# inspect` output. Then run the command (by default `assay serve`).
set -eu
if [ -z "${ASSAY_DATABASE_URL:-}" ] && [ -n "${ASSAY_DB_HOST:-}" ]; then
    password=""
    if [ -n "${ASSAY_DB_PASSWORD_FILE:-}" ]; then
        # The database container writes the file on first start; wait for it briefly.
        for _ in $(seq 1 60); do [ -s "$ASSAY_DB_PASSWORD_FILE" ] && break; sleep 0.5; done
        password="$(cat "$ASSAY_DB_PASSWORD_FILE")"
    fi
    ASSAY_DATABASE_URL="postgresql+psycopg://${ASSAY_DB_USER:-assay}:${password}@${ASSAY_DB_HOST}:${ASSAY_DB_PORT:-5432}/${ASSAY_DB_NAME:-assay}"
    export ASSAY_DATABASE_URL
fi
exec "$@"

#!/usr/bin/env bash
# Install and start Assay with its embedded defaults: SQLite audit store under ./var,
# the bubblewrap process sandbox, on 127.0.0.1:8000 (ASSAY_HOST / ASSAY_PORT to change).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install.sh service
VENV="${ASSAY_VENV:-$PWD/.venv}"
export ASSAY_DATABASE_URL="${ASSAY_DATABASE_URL:-sqlite:///$PWD/var/assay.db}"
echo "serve.sh: create an API key in another shell with:" >&2
echo "  ASSAY_DATABASE_URL=$ASSAY_DATABASE_URL $VENV/bin/assay keys create --scopes reward,audit" >&2
exec "$VENV/bin/assay" serve --host "${ASSAY_HOST:-127.0.0.1}" --port "${ASSAY_PORT:-8000}"

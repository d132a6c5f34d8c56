#!/usr/bin/env bash
# Install everything the tests need and run the whole suite:
# bubblewrap and the virtualenv, a private Postgres cluster, and (unless
# ASSAY_SKIP_DOCKER=1) the Docker engine, Compose v2 and the offline-built images, so the
# verifier suite runs on both sandbox backends. Extra arguments go to pytest.
#
# The quick loop: `scripts/test.sh -m "not slow"` runs what takes seconds (the app
# in-process, the process backend, SQLite); it deselects the docker, postgres, browser and
# multi-process tests, so it skips the Docker engine, the image build and chromium.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install.sh test
VENV="${ASSAY_VENV:-$PWD/.venv}"
quick=0
case " $* " in *"not slow"*) quick=1 ;; esac

# The viewer's browser tests drive Debian's chromium through Playwright (its own browser download is unreachable).
if [ "$quick" = 0 ] && ! command -v chromium >/dev/null; then
  as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
  # The lists install.sh just used serve; fetched again only when they cannot.
  apt_chromium() { DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq chromium >/dev/null; }
  apt_chromium 2>/dev/null || { as_root apt-get update -qq && apt_chromium; }
fi

ASSAY_TEST_POSTGRES_URL="$(scripts/postgres.sh start)"
export ASSAY_TEST_POSTGRES_URL
export ASSAY_SQL_POSTGRES_URL="${ASSAY_SQL_POSTGRES_URL:-$ASSAY_TEST_POSTGRES_URL}"

backends=process
if [ "${ASSAY_SKIP_DOCKER:-0}" != 1 ] && [ "$quick" = 0 ]; then
  # The project's interpreter for the image build, and no `make`: a fresh machine may lack both.
  ASSAY_GVISOR="${ASSAY_GVISOR:-1}" PYTHON="$VENV/bin/python" scripts/docker_engine.sh
  PYTHON="$VENV/bin/python" scripts/build_images.sh
  backends=process,docker
fi
export ASSAY_TEST_BACKENDS="${ASSAY_TEST_BACKENDS:-$backends}"

"$VENV/bin/ruff" check .
set +e
"$VENV/bin/python" -m pytest "$@"
status=$?
set -e
if [ "$status" -eq 5 ]; then
  echo "test.sh: pytest collected no tests; that is a failure" >&2
  exit 1
fi
exit "$status"

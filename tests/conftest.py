"""Shared fixtures: real sandboxes and a real uvicorn server on a free port."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from sandboxes.factory import create_sandbox
from service.auth import create_key
from service.store import AuditStore

BACKENDS = [b.strip() for b in os.environ.get("ASSAY_TEST_BACKENDS", "process").split(",") if b.strip()]
REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session", params=BACKENDS)
def sandbox(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    """Every verifier test runs on each backend named in ASSAY_TEST_BACKENDS (`remote`: a
    real sandboxd subprocess on the process backend, reached through its unix socket)."""
    if request.param == "remote":
        from tests.sandboxd_support import Sandboxd

        runner = Sandboxd(tmp_path_factory.mktemp("sandboxd"))
        yield runner.client
        runner.stop()
        return
    # ASSAY_TEST_DOCKER_RUNTIME=runsc runs the docker backend's suites under gVisor.
    box = create_sandbox(request.param, workers=2, image=os.environ.get("ASSAY_SANDBOX_IMAGE", "assay-runtime:latest"),
                         runtime=os.environ.get("ASSAY_TEST_DOCKER_RUNTIME") or None)
    yield box
    box.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LiveServer:
    """`assay serve` in a subprocess, as an operator would run it."""

    def __init__(self, workdir: Path, env: dict[str, str] | None = None, log_level: str = "warning") -> None:
        self.workdir = workdir
        self.log_level = log_level
        self.extra_env = env or {}
        self.db_url = self.extra_env.get("ASSAY_DATABASE_URL", f"sqlite:///{workdir / 'audit.db'}")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = workdir / "server.log"
        self.start()
        self.admin_key = self.create_key("reward,audit,admin")

    def env(self) -> dict[str, str]:
        return {**os.environ, "ASSAY_DATABASE_URL": self.db_url, "ASSAY_SANDBOX_WORKERS": "2", **self.extra_env}

    def start(self) -> None:
        log = open(self.log_path, "ab")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "service.cli", "serve", "--port", str(self.port), "--log-level", self.log_level],
            env=self.env(), cwd=REPO, stdout=log, stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 180  # a loaded 2-core machine can take over a minute to start
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited: {self.log_path.read_text()[-3000:]}")
            try:
                if httpx.get(self.url + "/readyz", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        self.proc.kill()  # a server that never became ready must not outlive the test
        self.proc.wait()
        raise RuntimeError(f"server did not become ready: {self.log_path.read_text()[-3000:]}")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def restart(self) -> None:
        self.stop()
        self.start()

    def create_key(self, scopes: str) -> str:
        """What `assay keys create` does, against the server's own database."""
        out = subprocess.run([sys.executable, "-m", "service.cli", "keys", "create", "--scopes", scopes],
                             env=self.env(), cwd=REPO, capture_output=True, text=True, check=True)
        return out.stdout.strip()

    def client(self, key: str | None = None, timeout: float = 120) -> httpx.Client:
        headers = {"Authorization": f"Bearer {key or self.admin_key}"}
        return httpx.Client(base_url=self.url, headers=headers, timeout=timeout)


@pytest.fixture(scope="session")
def live_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    server = LiveServer(tmp_path_factory.mktemp("assay-server"))
    yield server
    server.stop()


@pytest.fixture
def fresh_server(tmp_path: Path) -> Iterator[LiveServer]:
    """A server of its own, for tests that restart it or need an empty audit log."""
    server = LiveServer(tmp_path)
    yield server
    server.stop()


@pytest.fixture
def store(tmp_path: Path) -> AuditStore:
    return AuditStore(f"sqlite:///{tmp_path / 'store.db'}")


__all__ = ["LiveServer", "create_key", "free_port"]

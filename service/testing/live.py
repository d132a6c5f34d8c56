"""`assay serve` in a subprocess on a free port, as an operator would run it.

For what needs a real server process: restarts, several replicas, a real ASGI server's
edge behaviour, benchmarks. Request tests that need none of that use the in-process
client (`tests/conftest.py`: `client`).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]



def terminate(proc: subprocess.Popen, timeout_s: float = 30, kill: Callable[[int], None] | None = None) -> None:
    """SIGTERM, then a kill (`kill(pid)` when given, e.g. of the whole tree) if it does not end in time."""
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        (kill or (lambda _pid: proc.kill()))(proc.pid)
        proc.wait()

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
        if self.proc:
            terminate(self.proc)

    def restart(self) -> None:
        self.stop()
        self.start()

    def create_key(self, scopes: str) -> str:
        """`assay keys create`, against the server's own database: the command's code in this
        process (service/testing/cli.py; an interpreter of its own cost seconds a key)."""
        from service.testing.cli import run_cli

        out = run_cli(["keys", "create", "--scopes", scopes], self.env())
        assert out.returncode == 0, out.stderr
        return out.stdout.strip()

    def client(self, key: str | None = None, timeout: float = 120) -> httpx.Client:
        headers = {"Authorization": f"Bearer {key or self.admin_key}"}
        return httpx.Client(base_url=self.url, headers=headers, timeout=timeout)

    def anonymous(self, timeout: float = 60) -> httpx.Client:
        """A client that sends no key (a browser, OpenRLHF's key-in-the-URL)."""
        return httpx.Client(base_url=self.url, timeout=timeout)

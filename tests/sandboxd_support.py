"""A real `sandboxd` in a subprocess, as compose runs it, and a client for it."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import time
from pathlib import Path

from sandboxes.base import SandboxUnavailable
from sandboxes.remote import RemoteSandbox
from service.testing.live import terminate

REPO = Path(__file__).resolve().parent.parent
START_TIMEOUT_S = 120.0


class Sandboxd:
    """`python -m sandboxes.sandboxd` on a unix socket in `workdir`, with a fresh secret."""

    def __init__(self, workdir: Path, *args: str, backend: str = "process", workers: int = 2) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.secret_file = workdir / "secret"
        if not self.secret_file.exists():  # a restarted runner keeps its deployment's secret
            self.secret_file.write_text(secrets.token_hex(32))
        self.url = f"unix://{workdir / 'sandboxd.sock'}"
        self.log_path = workdir / "sandboxd.log"
        image = os.environ.get("ASSAY_SANDBOX_IMAGE", "assay-runtime:latest")
        command = [sys.executable, "-m", "sandboxes.sandboxd", "--listen", self.url, "--secret-file",
                   str(self.secret_file), "--backend", backend, "--workers", str(workers), "--image", image, *args]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(command, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
        self.client = self._wait()

    @property
    def secret(self) -> bytes:
        return self.secret_file.read_text().encode()

    def _wait(self) -> RemoteSandbox:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"sandboxd exited: {self.log_path.read_text()[-3000:]}")
            try:
                return RemoteSandbox(self.url, self.secret)
            except SandboxUnavailable:
                if time.monotonic() > deadline:
                    self.stop()
                    raise
            time.sleep(0.1)

    def log(self) -> str:
        return self.log_path.read_text()

    def stop(self) -> None:
        terminate(self.proc)

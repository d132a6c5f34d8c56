"""`assay serve` as several API processes on one listening socket (ASSAY_API_PROCESSES).

Python runs one thread at a time in a process, so one API process uses about one core
however many the machine has (docs/benchmarks.md, round 12: the event loop, the record
writer and the verify threads together at 96% of one core, the machine a third idle). With
N > 1 this supervisor binds the socket, makes what the processes must not race to make (the
schema, the signing key), then runs N ordinary `assay serve` processes on the socket: the
kernel hands each new connection to one of them. Each is a replica of the same database,
as in docs/scale_out.md: its own audit chains (`<chain id>.p<slot>`), its share of the
sandbox workers, and its metrics in one directory that `/metrics` sums over all of them. A
process that dies is started again in its slot; SIGTERM or SIGINT ends them all gracefully.
"""

from __future__ import annotations

import ctypes
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

from service.audit_chain import chain_base
from service.config import Settings
from service.metrics import MULTIPROCESS_DIR_ENV, forget_process, serve_multiprocess_port

log = logging.getLogger("assay.serve")

# A process that dies this soon after its start is failing to start: wait before the next try,
# doubling up to RESTART_DELAY_MAX_S, so a broken configuration does not spin the machine.
QUICK_DEATH_S = 10.0
RESTART_DELAY_MAX_S = 30.0
# uvicorn's exit code when the app could not start (e.g. a setting the app refuses).
STARTUP_FAILURE = 3
# SIGTERM to the processes, then this long (uvicorn's graceful shutdown is 10 s) before SIGKILL.
STOP_TIMEOUT_S = 30.0


PR_SET_PDEATHSIG = 1  # prctl(2)


def die_with_supervisor(supervisor: int) -> None:
    """In an API process: end (SIGTERM, so gracefully) when the supervisor dies, even by SIGKILL,
    rather than go on serving the socket with nobody to stop it."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != supervisor:  # it died before the line above
        os.kill(os.getpid(), signal.SIGTERM)


def sandbox_shares(workers: int, processes: int) -> list[int]:
    """ASSAY_SANDBOX_WORKERS split between the processes (each gets at least one)."""
    return [max(1, workers // processes + (slot < workers % processes)) for slot in range(processes)]


def listening_socket(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


@dataclass
class _Slot:
    index: int
    env: dict[str, str]
    proc: subprocess.Popen[bytes] | None = None
    started: float = 0.0
    starts: int = 0
    delay_s: float = 1.0
    restart_at: float = 0.0


class Supervisor:
    def __init__(self, settings: Settings, sock: socket.socket, log_level: str, metrics_dir: str) -> None:
        self.sock, self.log_level, self.metrics_dir = sock, log_level, metrics_dir
        base = chain_base(settings.audit_chain_id)
        shares = sandbox_shares(settings.sandbox_workers, settings.api_processes)
        common = {k: v for k, v in os.environ.items() if k != "ASSAY_METRICS_PORT"}
        common.update({"ASSAY_API_PROCESSES": "1", MULTIPROCESS_DIR_ENV: metrics_dir})
        self.slots = [_Slot(i, {**common, "ASSAY_AUDIT_CHAIN_ID": f"{base[:50]}.p{i}",
                                "ASSAY_SANDBOX_WORKERS": str(shares[i])})
                      for i in range(settings.api_processes)]
        self.stopping = False
        self.exit_code = 0

    def start(self, slot: _Slot) -> None:
        fd = self.sock.fileno()
        slot.proc = subprocess.Popen(
            [sys.executable, "-m", "service.cli", "serve", "--fd", str(fd), "--supervisor", str(os.getpid()),
             "--log-level", self.log_level],
            env=slot.env, pass_fds=(fd,))
        slot.started = time.monotonic()
        slot.starts += 1
        log.info("API process %d started (pid %d)", slot.index, slot.proc.pid)

    def run(self) -> int:
        for slot in self.slots:
            self.start(slot)
        while not self.stopping:
            for slot in self.slots:
                self._tend(slot)
            time.sleep(0.2)
        return self._stop_all()

    def _tend(self, slot: _Slot) -> None:
        if slot.proc is not None:
            code = slot.proc.poll()
            if code is None:
                return
            forget_process(self.metrics_dir, slot.proc.pid)
            if code == STARTUP_FAILURE and slot.starts == 1:  # the configuration, not a crash: give up
                log.error("API process %d could not start; stopping", slot.index)
                self.stopping, self.exit_code, slot.proc = True, STARTUP_FAILURE, None
                return
            quick = time.monotonic() - slot.started < QUICK_DEATH_S
            slot.delay_s = min(slot.delay_s * 2, RESTART_DELAY_MAX_S) if quick else 1.0
            slot.restart_at = time.monotonic() + (slot.delay_s if quick else 0.0)
            log.error("API process %d (pid %d) exited with %d; starting it again", slot.index, slot.proc.pid, code)
            slot.proc = None
        if time.monotonic() >= slot.restart_at and not self.stopping:
            self.start(slot)

    def _stop_all(self) -> int:
        running = [s.proc for s in self.slots if s.proc is not None and s.proc.poll() is None]
        for proc in running:
            proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT_S
        for proc in running:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        return self.exit_code

    def stop(self, *_: object) -> None:
        self.stopping = True


def serve_processes(settings: Settings, host: str, port: int, log_level: str) -> int:
    """Run settings.api_processes API processes on host:port until SIGTERM or SIGINT."""
    from service.signing import Signer, key_path

    Signer.load_or_create(key_path(settings))  # made once here: processes starting together would race
    sock = listening_socket(host, port)
    metrics_dir = tempfile.mkdtemp(prefix="assay-metrics-")
    stop_metrics = None
    if settings.metrics_port is not None:
        stop_metrics = serve_multiprocess_port(metrics_dir, settings.metrics_host, settings.metrics_port)
    supervisor = Supervisor(settings, sock, log_level, metrics_dir)
    signal.signal(signal.SIGTERM, supervisor.stop)
    signal.signal(signal.SIGINT, supervisor.stop)
    try:
        return supervisor.run()
    finally:
        sock.close()
        if stop_metrics is not None:
            stop_metrics()
        shutil.rmtree(metrics_dir, ignore_errors=True)

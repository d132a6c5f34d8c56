"""The `process` backend: bubblewrap namespaces around warm workers.

Each pool slot is one long-lived worker (`sandboxes/inside/worker.py`) inside its own
bubblewrap sandbox: no network, read-only system, private /tmp, its own PID namespace,
and, when the service runs as root, its own unprivileged uid so that the process limit of
one job cannot starve another. Every job is forked from a warm worker into a fresh
nested namespace (see worker.py), so a job pays a fork, not an interpreter start.
"""

from __future__ import annotations

import itertools
import logging
import os
import queue
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from sandboxes.base import SandboxError, SandboxUnavailable
from sandboxes.exec_helper import SANDBOX_PATH as EXEC_HELPER_PATH
from sandboxes.exec_helper import helper_path
from sandboxes.warm import STDERR_LINE_BYTES, WarmWorker, WarmWorkerBackend, WorkerTimings

log = logging.getLogger(__name__)

PROJECT_ROOT = Path(__file__).resolve().parent.parent
# Packages whose code may run inside a sandbox. Never the service (it holds secrets).
SANDBOX_PACKAGES = ("sandboxes", "verifiers")
MOUNT_ROOT = "/opt/assay"
VENV_MOUNT = f"{MOUNT_ROOT}/venv"
# Each worker runs under a uid of its own from here on when the service runs as root.
FIRST_SANDBOX_UID = 61000
BWRAP_PROBE_TIMEOUT_S = 30
WORKER_PATH = "/usr/local/bin:/usr/bin:/bin"
WORKER_KILL_WAIT_S = 10


def _ro_bind(source: str, dest: str, made: set[str]) -> list[str]:
    """Bind read-only, first creating world-traversable parents (bwrap makes them 0700)."""
    args: list[str] = []
    for parent in reversed(Path(dest).parents):
        if str(parent) != "/" and str(parent) not in made:
            made.add(str(parent))
            args += ["--perms", "0755", "--dir", str(parent)]
    return args + ["--ro-bind", source, dest]


def _system_binds() -> list[str]:
    args: list[str] = []
    made: set[str] = set()
    for top in ("/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        path = Path(top)
        if path.is_symlink():
            args += ["--symlink", os.readlink(top), top]
        elif path.is_dir():
            args += _ro_bind(top, top, made)
    for prefix in sorted({sys.base_prefix, sys.base_exec_prefix}):
        if not prefix.startswith("/usr"):
            args += _ro_bind(prefix, prefix, made)
    if sys.prefix != sys.base_prefix:
        # A virtualenv is mounted at a fixed path: where it lives (maybe under /tmp, which
        # every job gets fresh) must not decide what the sandbox can import.
        args += _ro_bind(sys.prefix, VENV_MOUNT, made)
    for package in SANDBOX_PACKAGES:
        args += _ro_bind(str(PROJECT_ROOT / package), f"{MOUNT_ROOT}/{package}", made)
    helper = helper_path()
    if helper is not None:  # sandboxes/exec_helper.py: how a job starts a program under limits
        args += _ro_bind(helper, EXEC_HELPER_PATH, made)
    return args


def _sandbox_python() -> str:
    """This interpreter's path inside the sandbox."""
    if sys.prefix != sys.base_prefix:
        return f"{VENV_MOUNT}/bin/{Path(sys.executable).name}"
    return sys.executable


def check_namespaces() -> None:
    """Raise SandboxUnavailable unless bubblewrap can build a sandbox here."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise SandboxUnavailable(
            "the process sandbox needs bubblewrap (`apt-get install bubblewrap`); "
            "refusing to run untrusted work unisolated"
        )
    probe = subprocess.run(
        [bwrap, "--unshare-all", "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "true"],
        capture_output=True,
        timeout=BWRAP_PROBE_TIMEOUT_S,
    )
    if probe.returncode != 0:
        raise SandboxUnavailable(
            "bubblewrap cannot create namespaces on this machine "
            f"({probe.stderr.decode(errors='replace').strip()}); refusing to run untrusted work unisolated"
        )


class BubblewrapWorker(WarmWorker):
    """One warm worker process inside its own bubblewrap sandbox (or none, when unsafe)."""

    def __init__(self, preload: tuple[str, ...], uid: int | None, unsafe: bool, start_timeout_s: float) -> None:
        super().__init__()
        self.uid = uid
        command = self._unsafe_command(preload) if unsafe else self._bwrap_command(preload, uid)
        try:
            self.proc = _spawn(lambda: subprocess.Popen(
                command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0,
                env={"PATH": WORKER_PATH, "LANG": "C.UTF-8"},
            ))
        except OSError as exc:
            raise SandboxError("could not start a sandbox worker", cause="worker_start_failed") from exc
        assert self.proc.stdin and self.proc.stdout and self.proc.stderr
        self._in = self.proc.stdin.fileno()
        os.set_blocking(self._in, False)
        self.out_fd = self.proc.stdout.fileno()
        threading.Thread(target=self._drain_stderr, daemon=True).start()
        try:
            ready = self.read(time.monotonic() + start_timeout_s)
        except SandboxError as exc:
            self.kill()
            raise SandboxError("a sandbox worker did not start", cause="worker_start_failed") from exc
        if ready.get("t") != "ready":
            self.kill()
            raise SandboxError("a sandbox worker did not start", cause="worker_start_failed")

    @staticmethod
    def _unsafe_command(preload: tuple[str, ...]) -> list[str]:
        return [sys.executable, "-I", "-B", str(PROJECT_ROOT / "sandboxes" / "worker.py"), "--unsafe",
                ",".join(preload)]

    @staticmethod
    def _bwrap_command(preload: tuple[str, ...], uid: int | None) -> list[str]:
        command = [
            "bwrap", "--die-with-parent", "--new-session",
            "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try",
            *_system_binds(),
            "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--chdir", "/tmp",
            "--clearenv", "--setenv", "PATH", WORKER_PATH, "--setenv", "LANG", "C.UTF-8",
        ]
        python = [_sandbox_python(), "-I", "-B", f"{MOUNT_ROOT}/sandboxes/inside/worker.py", ",".join(preload)]
        if uid is None:
            return [command[0], "--unshare-user", *command[1:], "--", *python]
        drop = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--bounding-set=-all",
                "--no-new-privs"]
        return [*command, "--", *drop, *python]

    def _drain_stderr(self) -> None:
        assert self.proc.stderr
        for line in iter(self.proc.stderr.readline, b""):
            self.stderr_tail.append(line[:STDERR_LINE_BYTES])

    def writable_fd(self) -> int:
        return self._in

    def write_some(self, data: bytes) -> int:
        return os.write(self._in, data)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        try:
            self.proc.wait(timeout=WORKER_KILL_WAIT_S)
        except subprocess.TimeoutExpired:
            log.error("worker %s did not die", self.proc.pid)
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream:
                stream.close()


class _Spawner:
    """One long-lived thread that starts every worker process.

    `bwrap --die-with-parent` is PR_SET_PDEATHSIG, which fires when the *thread* that
    forked the worker exits, not the process. Workers are started from whatever thread
    needs one (anyio's worker threads, which retire after idling; a sandbox runner's
    per-connection threads), so a worker would die with that thread, possibly while
    another thread's job runs on it. Forked from this thread, it dies with the process."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[tuple[Any, queue.SimpleQueue[tuple[bool, Any]]]] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def _serve(self) -> None:
        while True:
            make, reply = self._jobs.get()
            try:
                reply.put((True, make()))
            except BaseException as exc:  # handed to the caller's thread
                reply.put((False, exc))

    def __call__(self, make: Any) -> Any:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._serve, daemon=True, name="assay-worker-spawner")
                self._thread.start()
        reply: queue.SimpleQueue[tuple[bool, Any]] = queue.SimpleQueue()
        self._jobs.put((make, reply))
        ok, value = reply.get()
        if not ok:
            raise value
        return value


_spawn = _Spawner()


class ProcessSandbox(WarmWorkerBackend):
    name = "process"

    def __init__(self, workers: int | None = None, *, unsafe_no_isolation: bool = False,
                 timings: WorkerTimings | None = None) -> None:
        """`unsafe_no_isolation` only matters where namespaces cannot be made: then jobs
        run with rlimits and a process group but no namespaces, instead of refusing."""
        super().__init__(workers, timings or WorkerTimings())
        self.unsafe = False
        try:
            check_namespaces()
        except SandboxUnavailable:
            if not unsafe_no_isolation:
                raise
            if os.geteuid() == 0:
                raise SandboxUnavailable("ASSAY_UNSAFE_NO_ISOLATION refuses to run jobs as root without "
                                         "namespaces; start the service as an unprivileged user") from None
            log.critical("NO SANDBOX ISOLATION: namespaces are unavailable and ASSAY_UNSAFE_NO_ISOLATION is set; "
                         "untrusted code runs with this service user's rights")
            self.unsafe = True
        self._uids = itertools.count(FIRST_SANDBOX_UID) if os.geteuid() == 0 and not self.unsafe else None
        self._free_uids: list[int] = []
        self._uid_lock = threading.Lock()

    def _new_uid(self) -> int | None:
        if self._uids is None:
            return None
        with self._uid_lock:
            return self._free_uids.pop() if self._free_uids else next(self._uids)

    def start_worker(self, preload: tuple[str, ...]) -> WarmWorker:
        uid = self._new_uid()
        try:
            return BubblewrapWorker(preload, uid, self.unsafe, self.timings.start_timeout_s)
        except BaseException:
            self._free_uid(uid)
            raise

    def _free_uid(self, uid: int | None) -> None:
        if uid is not None:
            with self._uid_lock:
                self._free_uids.append(uid)

    def retire_worker(self, worker: WarmWorker) -> None:
        worker.kill()
        if isinstance(worker, BubblewrapWorker):
            self._free_uid(worker.uid)

    def describe(self) -> dict[str, Any]:
        return {"backend": self.name, "workers_per_pool": self.workers, "pools": self.pool_names(),
                "isolation": "none (unsafe)" if self.unsafe else "namespaces"}

"""The `process` backend: bubblewrap namespaces around warm workers.

Each pool slot is one long-lived worker (`sandboxes/worker.py`) inside its own
bubblewrap sandbox: no network, read-only system, private /tmp, its own PID namespace,
and, when the service runs as root, its own unprivileged uid so that the process limit of
one job cannot starve another. Every job is forked from a warm worker into a fresh
nested namespace (see worker.py), so a job pays a fork, not an interpreter start.
"""

from __future__ import annotations

import base64
import itertools
import logging
import os
import queue
import select
import shutil
import struct
import subprocess
import sys
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any

from sandboxes.base import (
    CallEnded,
    CallResult,
    CallSession,
    Job,
    JobResult,
    Limits,
    MessageHandler,
    RequestTimeout,
    Sandbox,
    SandboxBusy,
    SandboxError,
    SandboxUnavailable,
)
from sandboxes.frames import decode_done, read_frame, write_frame

log = logging.getLogger(__name__)

PROJECT_ROOT = Path(__file__).resolve().parent.parent
# Packages whose code may run inside a sandbox. Never the service (it holds secrets).
SANDBOX_PACKAGES = ("sandboxes", "verifiers")
MOUNT_ROOT = "/opt/assay"
VENV_MOUNT = f"{MOUNT_ROOT}/venv"
WORKER_START_TIMEOUT_S = 60.0
# Host-side grace beyond a job's wall limit before the worker itself is presumed stuck.
HOST_GRACE_S = 5.0
FIRST_SANDBOX_UID = 61000


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
        timeout=30,
    )
    if probe.returncode != 0:
        raise SandboxUnavailable(
            "bubblewrap cannot create namespaces on this machine "
            f"({probe.stderr.decode(errors='replace').strip()}); refusing to run untrusted work unisolated"
        )


class _Worker:
    """One warm worker process inside its own bubblewrap sandbox."""

    def __init__(self, preload: tuple[str, ...], uid: int | None, unsafe: bool = False) -> None:
        if unsafe:
            self._spawn([sys.executable, "-I", "-B", str(PROJECT_ROOT / "sandboxes" / "worker.py"), "--unsafe",
                         ",".join(preload)])
            return
        command = [
            "bwrap",
            "--die-with-parent",
            "--new-session",
            "--unshare-ipc",
            "--unshare-pid",
            "--unshare-net",
            "--unshare-uts",
            "--unshare-cgroup-try",
            *_system_binds(),
            "--proc",
            "/proc",
            "--dev",
            "/dev",
            "--tmpfs",
            "/tmp",
            "--chdir",
            "/tmp",
            "--clearenv",
            "--setenv",
            "PATH",
            "/usr/local/bin:/usr/bin:/bin",
            "--setenv",
            "LANG",
            "C.UTF-8",
        ]
        python = [_sandbox_python(), "-I", "-B", f"{MOUNT_ROOT}/sandboxes/worker.py", ",".join(preload)]
        if uid is None:
            command[1:1] = ["--unshare-user"]
            command += ["--", *python]
        else:
            command += [
                "--",
                "setpriv",
                f"--reuid={uid}",
                f"--regid={uid}",
                "--clear-groups",
                "--bounding-set=-all",
                "--no-new-privs",
                *python,
            ]
        self._spawn(command)

    def _spawn(self, command: list[str]) -> None:
        self.proc = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0,
            env={"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"},
        )
        assert self.proc.stdin and self.proc.stdout and self.proc.stderr
        self._in = self.proc.stdin.fileno()
        self._out = self.proc.stdout.fileno()
        self.stderr_tail: deque[bytes] = deque(maxlen=50)
        threading.Thread(target=self._drain_stderr, daemon=True).start()
        ready = self.read(time.monotonic() + WORKER_START_TIMEOUT_S)
        if ready.get("t") != "ready":
            self.kill()
            raise SandboxError(f"worker did not start: {ready!r}")

    def _drain_stderr(self) -> None:
        assert self.proc.stderr
        for line in iter(self.proc.stderr.readline, b""):
            self.stderr_tail.append(line[:500])

    def send(self, frame: dict[str, Any]) -> None:
        try:
            write_frame(self._in, frame)
        except OSError as exc:
            raise SandboxError(f"worker pipe closed: {exc}") from exc

    def read(self, deadline: float) -> dict[str, Any]:
        remaining = deadline - time.monotonic()
        ready, _, _ = select.select([self._out], [], [], max(remaining, 0))
        if not ready:
            raise _ReadTimeout("worker did not answer in time")
        try:
            frame = read_frame(self._out)
        except (EOFError, OSError, ValueError, struct.error) as exc:
            tail = b"".join(self.stderr_tail).decode(errors="replace")[-1000:]
            raise SandboxError(f"worker died: {exc!r} {tail}") from exc
        if not isinstance(frame, dict):
            raise SandboxError("worker sent a malformed frame")
        return frame

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            log.error("worker %s did not die", self.proc.pid)
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream:
                stream.close()


class _ReadTimeout(SandboxError):
    pass


class _Pool:
    """A bounded set of warm workers that share a preload list."""

    def __init__(self, preload: tuple[str, ...], size: int, uids: itertools.count | None,
                 unsafe: bool = False) -> None:
        self.preload = preload
        self.unsafe = unsafe
        self.size = size
        self._uids = uids
        self._idle: queue.LifoQueue[_Worker] = queue.LifoQueue()
        self._slots = threading.BoundedSemaphore(size)
        self._lock = threading.Lock()
        self._free_uids: list[int] = []
        self._taken = 0  # slots held by callers now (for metrics)

    def _new_uid(self) -> int | None:
        if self._uids is None:
            return None
        with self._lock:
            return self._free_uids.pop() if self._free_uids else next(self._uids)

    def acquire(self, timeout_s: float) -> _Worker:
        if not self._slots.acquire(timeout=timeout_s):
            raise SandboxBusy(f"no sandbox worker free within {timeout_s:.0f}s")
        self._count_taken(1)
        try:
            while True:
                try:
                    worker = self._idle.get_nowait()
                except queue.Empty:
                    return self._start()
                if worker.alive():
                    return worker
                self._retire(worker)
        except BaseException:
            self._count_taken(-1)
            self._slots.release()
            raise

    def _start(self) -> _Worker:
        uid = self._new_uid()
        worker = _Worker(self.preload, uid, self.unsafe)
        worker.uid = uid  # type: ignore[attr-defined]
        return worker

    def _retire(self, worker: _Worker) -> None:
        worker.kill()
        uid = getattr(worker, "uid", None)
        if uid is not None:
            with self._lock:
                self._free_uids.append(uid)

    def release(self, worker: _Worker, healthy: bool) -> None:
        if healthy and worker.alive():
            self._idle.put(worker)
        else:
            self._retire(worker)
        self._count_taken(-1)
        self._slots.release()

    def _count_taken(self, delta: int) -> None:
        with self._lock:
            self._taken += delta

    def stats(self) -> dict[str, int]:
        """Worker slots, warm idle workers, and slots in use now."""
        return {"size": self.size, "idle": self._idle.qsize(), "in_use": self._taken}

    def warm(self) -> None:
        workers = [self.acquire(WORKER_START_TIMEOUT_S) for _ in range(self.size)]
        for worker in workers:
            self.release(worker, True)

    def close(self) -> None:
        while True:
            try:
                self._retire(self._idle.get_nowait())
            except queue.Empty:
                return


def _encode_files(files: dict[str, bytes]) -> dict[str, str]:
    return {name: base64.b64encode(data).decode() for name, data in files.items()}


class _ProcessCallSession(CallSession):
    def __init__(self, pool: _Pool, worker: _Worker, limits: Limits, on_message: MessageHandler | None) -> None:
        self._pool = pool
        self._worker = worker
        self._deadline = time.monotonic() + limits.wall_s + HOST_GRACE_S
        self._on_message = on_message
        self._ids = itertools.count(1)
        self._done: CallResult | None = None
        self._lock = threading.Lock()

    def _pump(self, want_answer: int | None, deadline: float | None = None) -> Any:
        """Read frames until the answer `want_answer` (or `done` when None) arrives."""
        while True:
            try:
                frame = self._worker.read(min(deadline or self._deadline, self._deadline))
            except _ReadTimeout:
                if deadline is not None and deadline < self._deadline:
                    raise
                self._close(healthy=False)
                raise
            except SandboxError:
                self._close(healthy=False)
                raise
            kind = frame.get("t")
            if kind == "ask":
                try:
                    reply = self._on_message(frame.get("body")) if self._on_message else None
                except BaseException:
                    # The trusted side failed: end the job, keep the worker, re-raise.
                    self._worker.send({"t": "abort"})
                    while self._done is None:
                        self._pump(None)
                    raise
                self._worker.send({"t": "ans", "id": frame.get("id"), "body": reply})
            elif kind == "ans" and want_answer is not None and frame.get("id") == want_answer:
                return frame.get("body")
            elif kind == "done":
                self._finish_with(frame)
                if want_answer is not None:
                    raise CallEnded(self._done)
                return None

    backend = "process"

    def _finish_with(self, frame: dict[str, Any]) -> None:
        if "infrastructure_error" in frame:
            time.sleep(0.05)  # let the stderr reader catch the supervisor's traceback
            tail = b"".join(self._worker.stderr_tail).decode(errors="replace")[-1500:]
            self._close(healthy=False)
            raise SandboxError(f"{frame['infrastructure_error']}: {tail}")
        self._done = decode_done(frame, self.backend)
        self._release_done()

    def _release_done(self) -> None:
        """Give the worker back once its job is done (backends may check it first)."""
        self._close(healthy=True)

    def _close(self, healthy: bool) -> None:
        if self._worker is not None:
            if not healthy:
                self._worker.kill()
            self._pool.release(self._worker, healthy)
            self._worker = None  # type: ignore[assignment]

    def _check_usable(self) -> None:
        if self._done is None and self._worker is None:
            raise SandboxError("the sandboxed call already failed")

    def request(self, message: Any, timeout_s: float | None = None) -> Any:
        with self._lock:
            if self._done is not None:
                raise CallEnded(self._done)
            self._check_usable()
            request_id = next(self._ids)
            self._worker.send({"t": "req", "id": request_id, "body": message})
            deadline = time.monotonic() + timeout_s if timeout_s is not None else None
            try:
                return self._pump(request_id, deadline)
            except _ReadTimeout:
                # Only this request ran out of time: kill the job, keep the warm worker.
                self._worker.send({"t": "abort"})
                while self._done is None:
                    self._pump(None)
                raise RequestTimeout(self._done) from None

    def wait(self) -> CallResult:
        with self._lock:
            self._check_usable()
            while self._done is None:
                self._pump(None)
            return self._done

    def finish(self) -> CallResult:
        with self._lock:
            self._check_usable()
            if self._done is None:
                self._worker.send({"t": "finish"})
        return self.wait()

    def abort(self) -> CallResult:
        with self._lock:
            self._check_usable()
            if self._done is None:
                self._worker.send({"t": "abort"})
        return self.wait()


class ProcessSandbox(Sandbox):
    name = "process"

    def __init__(self, workers: int | None = None, acquire_timeout_s: float = 30.0,
                 unsafe_no_isolation: bool = False) -> None:
        """`unsafe_no_isolation` only matters where namespaces cannot be made: then jobs
        run with rlimits and a process group but no namespaces, instead of refusing."""
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
        self.workers = workers or os.cpu_count() or 2
        self.acquire_timeout_s = acquire_timeout_s
        self._uids = itertools.count(FIRST_SANDBOX_UID) if os.geteuid() == 0 and not self.unsafe else None
        self._pools: dict[str, _Pool] = {}
        self._lock = threading.Lock()

    def _pool(self, name: str, preload: tuple[str, ...]) -> _Pool:
        with self._lock:
            pool = self._pools.get(name)
            if pool is None:
                pool = self._pools[name] = _Pool(preload, self.workers, self._uids, self.unsafe)
            elif pool.preload != preload:
                raise ValueError(f"pool {name!r} already exists with preload {pool.preload}")
            return pool

    def warm(self, pool: str, preload: tuple[str, ...] = ()) -> None:
        self._pool(pool, preload).warm()

    session_class: type[_ProcessCallSession] = _ProcessCallSession

    def _start(self, spec: dict[str, Any], limits: Limits, pool: str, preload: tuple[str, ...],
               on_message: MessageHandler | None) -> _ProcessCallSession:
        the_pool = self._pool(pool, preload)
        worker = the_pool.acquire(self.acquire_timeout_s)
        session = self.session_class(the_pool, worker, limits, on_message)
        try:
            worker.send({"t": "job", "spec": {**spec, "limits": limits.to_dict()}})
        except SandboxError:
            session._close(healthy=False)
            raise
        return session

    def run(self, job: Job) -> JobResult:
        spec = {
            "mode": "exec",
            "argv": job.command,
            "files": _encode_files(job.files),
            "stdin": base64.b64encode(job.stdin).decode(),
            "env": job.env,
        }
        return self._start(spec, job.limits, "exec", (), None).wait()

    def open(self, target: str, payload: Any, limits: Limits, *, pool: str = "default",
             preload: tuple[str, ...] = ()) -> CallSession:
        return self._start({"mode": "call", "target": target, "payload": payload}, limits, pool, preload, None)

    def call(self, target: str, payload: Any, limits: Limits, *, pool: str = "default",
             preload: tuple[str, ...] = (), on_message: MessageHandler | None = None) -> CallResult:
        spec = {"mode": "call", "target": target, "payload": payload}
        return self._start(spec, limits, pool, preload, on_message).wait()

    def close(self) -> None:
        with self._lock:
            for pool in self._pools.values():
                pool.close()
            self._pools.clear()

    def pool_stats(self) -> dict[str, dict[str, int]]:
        with self._lock:
            pools = dict(self._pools)
        return {name: pool.stats() for name, pool in pools.items()}

    def describe(self) -> dict[str, Any]:
        return {"backend": self.name, "workers_per_pool": self.workers, "pools": sorted(self._pools),
                "isolation": "none (unsafe)" if self.unsafe else "namespaces"}

"""Runs every case of one compiled program in one sandbox job (standard library only).

A fresh sandbox job per case paid a job's start (a fork of the warm worker, namespaces, a
scratch tmpfs) and the program's transfer for every case: most of a small program's time.
Here the program crosses once per response, and this runner, the job's own process,
runs it once per case, each time as a fresh process tree under that case's limits:

- CPU: RLIMIT_CPU on every process the program starts, and the CPU time of the whole
  tree (this runner is the subreaper of everything the program starts and reaps it all);
- memory: RLIMIT_AS (C, C++, Rust) and the peak RSS of the tree;
- output: stdout and stderr each read through a pipe and capped, the tree killed when
  one goes over; wall: the tree killed at the case's deadline; the streams can be opened
  by path too (`/dev/stdin`, `/dev/stdout`: inside/streams.py);
- between cases, nothing of one case is left for the next: each case runs in a directory
  of its own, made for it with the program's files and removed after it; in a sandbox,
  every process of the job but this runner is killed and reaped, every file the job could
  write is removed, and so are System V IPC objects and (in a container) POSIX message
  queues; no program can create one (RLIMIT_MSGQUEUE 0: on the process backend nothing
  could list it to remove it).

What this runner holds is never the answer: the cases' inputs and the program. Expected
outputs stay on the host, which compares each case's output (or has the task's checker
do it, in a job of its own). The job's own limits (CPU per process, wall of the whole
batch, output, processes) stay in force around this process, as for one case.

The outputs go out on the job's stdout, case after case (stdout, then stderr); the report
(the call's value) says how long each part is and how each case ended.
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import os
import select
import signal
import stat
import tempfile
import time
from typing import Any

from verifiers.code.inside.native import (
    LIBC,
    POLL_S,
    REAP_GRACE_S,
    Rlimits,
    become_subreaper,
    child_limits,
    describe_exit,
    limits_by_exec,
    program_descriptor,
    reap_children,
    spawn,
    write_files,
    write_out,
)
from verifiers.code.inside.streams import case_streams

READ_CHUNK = 65536
# The scratch directory the sandbox worker gives a job in both isolated modes
# (sandboxes/inside/worker.py SCRATCH); anywhere else this runner touches only its own.
JOB_SCRATCH = "/tmp/work"
# Places a job can write to, by sandbox mode: a namespace job writes only to its /tmp
# (its own tmpfs); a container job also to /dev/shm and /dev/mqueue.
ISOLATED_WRITABLE = ("/tmp", "/dev/shm", "/dev/mqueue")
# System V IPC: (INFO, STAT) commands of shmctl, semctl, msgctl (linux/ipc.h, shm.h, ...).
IPC_RMID = 0
SYSV = (("shmctl", 14, 13), ("semctl", 19, 18), ("msgctl", 12, 11))
IPC_BUFFER = 1024
# The cases' outputs held back before they are written out (_Outputs).
HELD_OUTPUT_BYTES = 1 << 20
_IPC_BUFFER = ctypes.create_string_buffer(IPC_BUFFER)


class Scope:
    """What this runner may end and wipe between cases, by the sandbox's mode.

    - namespace (process backend): this runner is PID 1 of the job's PID namespace; every
      other process there is the program's, and /tmp is the job's own tmpfs.
    - container (docker): the job's uid is this runner's and its programs' only (the
      supervisor is root): kill(-1) ends exactly them; /tmp, /dev/shm and /dev/mqueue are
      wiped after every job anyway.
    - unsafe (no isolation, the operator's explicit choice), or anywhere that is not one
      of those two: only the program's process group, and only the case's own directory;
      nothing else there is the job's alone.
    Both isolated modes run the job in the worker's scratch directory, JOB_SCRATCH.

    In every mode a program may take the permissions away from the directories its uid owns
    on the way to the scratch directory, or move that directory away and leave a link or a
    file in its place: `restore` undoes that before the runner goes on."""

    def __init__(self) -> None:
        self.scratch = os.getcwd()
        self.isolated = self.scratch == JOB_SCRATCH and (os.getpid() == 1 or _parent_is_root_and_we_are_not())
        self.modes = _owned_modes(self.scratch)

    def restore(self) -> None:
        """The scratch directory and those above it as they were when the job began: their
        permissions (from the top down), and the scratch directory itself, a directory again
        (emptied by `wipe`; whatever was moved away is removed there too)."""
        for path, mode in self.modes:
            with contextlib.suppress(OSError):
                os.chmod(path, mode)
        try:
            if stat.S_ISDIR(os.lstat(self.scratch).st_mode):
                return
        except FileNotFoundError:
            pass
        remove_path(self.scratch)
        os.mkdir(self.scratch, self.modes[-1][1] if self.modes and self.modes[-1][0] == self.scratch else 0o700)

    def end_all(self, group: int) -> None:
        with contextlib.suppress(OSError):
            os.kill(-1 if self.isolated else -group, signal.SIGKILL)

    def wipe(self) -> None:
        """Everything the job could write (the scratch directory itself stays, emptied)."""
        if not self.isolated:
            return
        _wipe_under(JOB_SCRATCH)
        for top in ISOLATED_WRITABLE:
            with contextlib.suppress(OSError):
                for entry in os.scandir(top):
                    if entry.path != JOB_SCRATCH:
                        remove_path(entry.path)
        _remove_sysv_ipc()


def _owned_modes(path: str) -> list[tuple[str, int]]:
    """(directory, permission bits) of `path` and the directories above it that this uid
    owns (which a program of the job could change), from the top down."""
    found: list[tuple[str, int]] = []
    while True:
        with contextlib.suppress(OSError):
            info = os.stat(path)
            if info.st_uid == os.getuid():
                found.insert(0, (path, stat.S_IMODE(info.st_mode)))
        parent = os.path.dirname(path)
        if parent == path:
            return found
        path = parent


def _parent_is_root_and_we_are_not() -> bool:
    try:
        return os.getuid() != 0 and os.stat(f"/proc/{os.getppid()}").st_uid == 0
    except OSError:
        return False


def remove_path(path: str) -> None:
    try:
        info = os.lstat(path)
    except OSError:
        return
    if stat.S_ISDIR(info.st_mode):
        _wipe_under(path)
        with contextlib.suppress(OSError):
            os.rmdir(path)
    else:
        with contextlib.suppress(OSError):
            os.unlink(path)


def _wipe_under(top: str) -> None:
    """Remove what is under `top`, whatever modes the program set (iterative: a program
    may nest directories deeper than any recursion limit)."""
    stack, dirs = [top], []
    while stack:
        path = stack.pop()
        with contextlib.suppress(OSError):
            os.chmod(path, 0o700)
        try:
            entries = list(os.scandir(path))
        except OSError:
            continue
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                stack.append(entry.path)
                dirs.append(entry.path)
            else:
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)
    for path in reversed(dirs):
        with contextlib.suppress(OSError):
            os.rmdir(path)


def _remove_sysv_ipc() -> None:
    """Every System V IPC object this uid may remove, found without /proc (a namespace
    job has none): the INFO command gives the highest index in use, STAT each index's id."""
    buffer = _IPC_BUFFER
    for name, info, stat_cmd in SYSV:
        ctl = getattr(LIBC, name)
        highest = ctl(0, 0, info, buffer) if name == "semctl" else ctl(0, info, buffer)
        for index in range(max(highest, -1) + 1):
            ipc_id = ctl(index, 0, stat_cmd, buffer) if name == "semctl" else ctl(index, stat_cmd, buffer)
            if ipc_id >= 0:
                if name == "semctl":
                    ctl(ipc_id, 0, IPC_RMID, None)
                else:
                    ctl(ipc_id, IPC_RMID, None)


class _Output:
    """One of the program's outputs, through a pipe, kept up to a cap."""

    def __init__(self, fd: int, cap: int) -> None:
        self.fd, self.cap, self.data, self.over, self.open = fd, cap, bytearray(), False, True

    def pump(self) -> None:
        try:
            chunk = os.read(self.fd, READ_CHUNK)
        except BlockingIOError:
            return
        if not chunk:
            self.close()
            return
        room = self.cap - len(self.data)
        self.data += chunk[: max(room, 0)]
        if len(chunk) > room:
            self.over = True
            self.close()

    def close(self) -> None:
        if self.open:
            self.open = False
            os.close(self.fd)


def _run_one(argv: list[str], env: dict[str, str], stdin: bytes, program_fd: int | None, limits: dict[str, Any],
             rlimits: Rlimits, scope: Scope) -> tuple[dict[str, Any], bytes, bytes]:
    """One case: the program with this stdin, its outputs captured, its tree ended and
    counted. (report, stdout, stderr)."""
    stdin_fd, (out_r, out_w), (err_r, err_w) = case_streams(stdin)
    started = time.monotonic()
    deadline = started + float(limits["wall_s"])
    pid = spawn(argv, env, stdin_fd, out_w, err_w, rlimits, program_fd)
    for fd in (stdin_fd, out_w, err_w):
        os.close(fd)
    outputs = [_Output(out_r, int(limits["output_bytes"])), _Output(err_r, int(limits["output_bytes"]))]
    pidfd = os.pidfd_open(pid)
    status = usage = None
    killed_by = None
    others_cpu, others_peak = 0.0, 0.0
    while status is None:
        got, got_status, got_usage = os.wait4(-1, os.WNOHANG)
        if got == pid:
            status, usage = got_status, got_usage
            break
        if got:  # a descendant that ended while the program ran
            others_cpu += got_usage.ru_utime + got_usage.ru_stime
            others_peak = max(others_peak, got_usage.ru_maxrss / 1024)
            continue
        if killed_by is None and any(output.over for output in outputs):
            killed_by = "output"
            scope.end_all(pid)
        left = deadline - time.monotonic()
        if left <= 0 and killed_by is None:
            killed_by = "timeout"
            scope.end_all(pid)
        reads = [pidfd, *(output.fd for output in outputs if output.open)]
        readable = select.select(reads, [], [], max(min(left, 0.05), POLL_S))[0]
        for output in outputs:
            if output.open and output.fd in readable:
                output.pump()
    os.close(pidfd)
    wall = time.monotonic() - started
    # What the program left: ended, reaped and counted, and its outputs' last bytes read.
    scope.end_all(pid)
    rest_cpu, rest_peak = reap_children()
    for output in outputs:
        while output.open:
            ready = select.select([output.fd], [], [], REAP_GRACE_S)[0]
            if not ready:  # a process that would not die still holds the pipe
                output.close()
                break
            output.pump()
    if killed_by is None and any(output.over for output in outputs):
        killed_by = "output"
    report = describe_exit(status, usage)
    report["cpu_s"] += others_cpu + rest_cpu
    report["peak_memory_mb"] = max(report["peak_memory_mb"], others_peak, rest_peak)
    report["wall_s"] = wall
    if killed_by:
        report["killed_by"] = killed_by
    return report, bytes(outputs[0].data), bytes(outputs[1].data)


def _job_limits(limits: dict[str, Any]) -> dict[str, Any] | None:
    """A case's share of a run job's own limits, where this runner's job has wider ones
    (inside/build.py: the compile's): file size, open files, processes, address space."""
    more = {"file_size_mb": limits.get("file_size_mb"), "open_files": limits.get("open_files"),
            "processes": limits.get("processes"), "memory_mb": limits.get("process_memory_mb")}
    return more if any(more.values()) else None


def _exec_allowed(scratch: str) -> bool:
    """Whether a program can be started by path from `scratch` (not mounted noexec), with
    the exec helper or prlimit there to set its limits."""
    return limits_by_exec() and not os.statvfs(scratch).f_flag & os.ST_NOEXEC


def _has_children() -> bool:
    try:
        os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return False
    return True


class _Outputs:
    """The cases' outputs on the job's stdout, in order, written in few large writes: each
    write wakes the sandbox's supervisor (CPU, on a loaded machine). Held back up to
    HELD_OUTPUT_BYTES (the host reads them only with the runner's report, at the end)."""

    def __init__(self) -> None:
        self.held: list[bytes] = []
        self.size = 0

    def add(self, data: bytes) -> None:
        self.held.append(data)
        self.size += len(data)
        if self.size > HELD_OUTPUT_BYTES:
            self.flush()

    def flush(self) -> None:
        data = b"".join(self.held)
        self.held, self.size = [], 0
        write_out(data)


def run_cases(payload: dict[str, Any], channel: Any) -> dict[str, Any]:
    """Payload: {"files": {name: base64}, "executables": [name], "argv": [...], "env": {...},
    "cases": [stdin text, ...], "limits": {"wall_s", "cpu_s", "address_space_mb",
    "stack_mb", "output_bytes"} (of each case), "stop_on_failure": bool}.

    Returns {"cases": [report, ...]} for the cases run, in order; each report has
    exit_code, signal, cpu_s, peak_memory_mb, wall_s, killed_by (if any), and the lengths
    of its stdout and stderr, which follow each other on the job's stdout. With
    `stop_on_failure`, the first case that does not end cleanly (exit 0, within its
    limits) is the last one run; `unclean` says that a case left a process that would not
    die, after which no case runs (the host runs the rest in a fresh job)."""
    become_subreaper()
    # Decoded once: every case gets the same files afresh.
    files = {name: base64.b64decode(data) for name, data in (payload.get("files") or {}).items()}
    return run_all(files, payload, Scope(), os.getcwd())


def run_all(files: dict[str, bytes], payload: dict[str, Any], scope: Scope, scratch: str) -> dict[str, Any]:
    """`run_cases` with the program's files at hand (as bytes)."""
    executables = list(payload.get("executables") or [])
    argv = list(payload["argv"])
    env = dict(payload.get("env") or {})
    limits = dict(payload["limits"])
    # A program the scratch lets run is written into each case's directory and started
    # by path, without a fork of this runner (native.spawn); where the scratch is noexec
    # (a container's), it runs from a memfd, started from a fork.
    program_fd = None if _exec_allowed(scratch) else program_descriptor(argv, files, executables)
    if program_fd is not None:
        # Run from its memfd: the file itself is not needed (and a Go binary is 1.3 MB
        # to write again for every case).
        files = {name: data for name, data in files.items() if name != argv[0][2:]}
        executables = [name for name in executables if name in files]
    # The same limits for every case, worked out once.
    rlimits = child_limits(limits.get("cpu_s"), limits.get("address_space_mb"), limits.get("stack_mb"),
                           _job_limits(limits))
    reports: list[dict[str, Any]] = []
    unclean = False
    outputs = _Outputs()
    for stdin in payload.get("cases") or []:
        case_dir = tempfile.mkdtemp(prefix="case-", dir=scratch)
        os.chdir(case_dir)
        write_files(files, binary=True)
        for name in executables:
            os.chmod(name, 0o755)
        report, out, err = _run_one(argv, env, str(stdin).encode(), program_fd, limits, rlimits, scope)
        scope.restore()
        os.chdir(scratch)
        remove_path(case_dir)
        scope.wipe()
        report["stdout_bytes"], report["stderr_bytes"] = len(out), len(err)
        outputs.add(out)
        outputs.add(err)
        reports.append(report)
        if _has_children():
            unclean = True
            break
        failed = report.get("killed_by") or report.get("exit_code") != 0
        if failed and payload.get("stop_on_failure"):
            break
    outputs.flush()
    return {"cases": reports, "unclean": unclean}

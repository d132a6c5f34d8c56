"""Compiles and runs programs of the compiled and scripted languages inside the sandbox.

Two entry points, each a call of its own job (a fork of a warm worker, in its own scratch
directory, under the job's limits):

- `compile_source`: writes the source, runs the compiler the host named, and returns the
  compiler's message and the files it produced (the artifacts), which the host keeps
  and sends to every run. The candidate's source is the only input: no test, answer or
  checker ever enters a compile job.
- `run_program`: writes the artifacts (and, for a checker, the case's files), runs the
  program with the case's stdin, and reports how it ended and what the whole process tree
  used. Its stdout and stderr go straight to the job's captured descriptors: the host
  compares them, never this process.

This process is the subreaper (in a namespace it is PID 1) of everything the program
starts: it reaps every descendant, so the CPU time and peak memory it reports are those
of the whole tree, and when the program ends it kills whatever the program left behind.
The host treats every number here as advisory where it matters: the sandbox's own
limits (CPU, wall, output, processes) stay in force around this process.

Standard library only.
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import glob
import math
import os
import resource
import select
import signal
import time
from typing import Any

from verifiers.code.inside.streams import stdin_descriptor, write_all

PR_SET_CHILD_SUBREAPER = 36
# close_range(2) (Linux 5.11+; the same number on x86-64 and arm64) with CLOSE_RANGE_CLOEXEC.
SYS_CLOSE_RANGE = 436
CLOSE_RANGE_CLOEXEC = 1 << 2
CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 0x1, 0x2, 0x4, 0x8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 0x20, 0x1000, 0x4000, 1 << 18
# Where a compiler that must find itself through /proc/self/exe gets that one link.
OWN_PROC = ".assay-proc"
MESSAGE_BYTES = 64 * 1024
# Artifacts cross the channel base64-encoded inside a frame of at most 16 MiB.
MAX_ARTIFACT_BYTES = 10 * 1024 * 1024
POLL_S = 0.005
COMPILE_LOG = ".assay-compile.log"
# After the program's end: how long to reap what was killed with it.
REAP_GRACE_S = 1.0
# The program's stack: as deep as its memory allows (judges set it so), within reason.
MAX_STACK_MB = 1024
# RLIMIT_NPROC counts the job's own processes too (as sandboxes/inside/worker.py counts).
NPROC_HEADROOM = 4
# util-linux's prlimit (Debian: essential; on the host and in the runtime image): sets
# limits on itself, then execs the command (`spawn`).
PRLIMIT = "/usr/bin/prlimit"
PRLIMIT_OPTIONS = {resource.RLIMIT_AS: "as", resource.RLIMIT_CPU: "cpu", resource.RLIMIT_STACK: "stack",
                   resource.RLIMIT_FSIZE: "fsize", resource.RLIMIT_NOFILE: "nofile", resource.RLIMIT_NPROC: "nproc",
                   resource.RLIMIT_MSGQUEUE: "msgqueue"}


# The process backend's exec helper (sandboxes/exec_helper.py: `HELPER RESOURCE SOFT HARD ...
# -- PATH ARGV...`), bound read-only into its sandboxes where the host could build it.
EXEC_HELPER = "/opt/assay/libexec/assay-exec"
# Looked up once, in the warm worker (its mounts are the jobs'): no job can add it later.
HAS_EXEC_HELPER = os.access(EXEC_HELPER, os.X_OK)
LIBC = ctypes.CDLL(None, use_errno=True)


def become_subreaper() -> None:
    with contextlib.suppress(OSError, AttributeError):
        LIBC.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def write_files(files: dict[str, str] | dict[str, bytes], binary: bool) -> None:
    """Files into the working directory: text, base64 text (`binary`), or bytes as they are."""
    for name, data in files.items():
        if "/" in name or name in ("", ".", ".."):
            raise ValueError("a file name with a path")
        with open(name, "wb") as f:
            if isinstance(data, bytes):
                f.write(data)
            else:
                f.write(base64.b64decode(data) if binary else data.encode())


Rlimits = list[tuple[int, tuple[int, int]]]


def child_limits(cpu_s: float | None, address_space_mb: int | None, stack_mb: int | None,
                 more: dict[str, Any] | None = None) -> Rlimits:
    """The rlimits a program's child sets before exec, worked out here, once, in the runner
    (the child inherits this process's limits, so the same arithmetic holds there): only
    ever tighter than this process's own, never looser.

    - cpu_s, address_space_mb, stack_mb: the case's CPU (whole seconds, one over), address
      space and stack (soft, within the hard limit);
    - `more`: the limits a sandbox job would have put on it, for a step of a job whose own
      limits are wider (inside/build.py compiles, then runs the cases, in one job). Keys:
      cpu_s (whole seconds, as the sandbox rounds), memory_mb (RLIMIT_AS), file_size_mb,
      open_files, processes (RLIMIT_NPROC with the sandbox's headroom, where the sandbox
      sets one: not as root);
    - always: no POSIX message queue (RLIMIT_MSGQUEUE 0). A queue outlives its process and
      a namespace job has no mqueue file system to find it again by; no judged program
      needs one. (System V objects are removed between cases: cases.py.)"""
    state: dict[int, tuple[int, int]] = {}
    plan: dict[int, tuple[int, int]] = {}

    def current(which: int) -> tuple[int, int]:
        if which not in state:
            state[which] = resource.getrlimit(which)
        return state[which]

    def tighten(which: int, soft: int, hard: int) -> None:
        # What setrlimit would refuse (a hard limit raised, soft over hard) changes nothing.
        old_hard = current(which)[1]
        raised = old_hard != resource.RLIM_INFINITY and (hard == resource.RLIM_INFINITY or hard > old_hard)
        if raised or (hard != resource.RLIM_INFINITY and (soft == resource.RLIM_INFINITY or soft > hard)):
            return
        state[which] = plan[which] = (soft, hard)

    if cpu_s is not None:
        seconds = max(1, math.ceil(cpu_s) + 1)
        tighten(resource.RLIMIT_CPU, seconds, seconds)
    if address_space_mb is not None:
        size = address_space_mb * 1024 * 1024
        tighten(resource.RLIMIT_AS, size, size)
    if stack_mb is not None:
        hard = current(resource.RLIMIT_STACK)[1]
        size = stack_mb * 1024 * 1024
        tighten(resource.RLIMIT_STACK, size if hard == resource.RLIM_INFINITY else min(size, hard), hard)
    more = more or {}
    values = {
        resource.RLIMIT_CPU: max(1, int(float(more["cpu_s"]) + 0.999)) if more.get("cpu_s") else None,
        resource.RLIMIT_AS: int(more["memory_mb"]) * 1024 * 1024 if more.get("memory_mb") else None,
        resource.RLIMIT_FSIZE: int(more["file_size_mb"]) * 1024 * 1024 if more.get("file_size_mb") else None,
        resource.RLIMIT_NOFILE: int(more["open_files"]) if more.get("open_files") else None,
        resource.RLIMIT_NPROC: int(more["processes"]) + NPROC_HEADROOM
        if more.get("processes") and os.getuid() != 0 else None,
        resource.RLIMIT_MSGQUEUE: 0,
    }
    for which, value in values.items():
        if value is None:
            continue
        soft, hard = current(which)
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        if soft != resource.RLIM_INFINITY and which != resource.RLIMIT_CPU:
            value = min(value, soft)
        tighten(which, value, value)
    return list(plan.items())


def own_proc_tree(program: str) -> str | None:
    """For a compiler that finds its installation through /proc/self/exe (rustc) where
    this job has an empty /proc (the process backend): a directory holding only
    `self/exe` -> `program`, which `_enter_own_proc` shows the compiler as its /proc.
    None where /proc/self/exe already resolves (docker): nothing to do there."""
    if os.path.exists("/proc/self/exe"):
        return None
    tree = os.path.abspath(OWN_PROC)
    os.makedirs(os.path.join(tree, "self"))
    os.symlink(program, os.path.join(tree, "self", "exe"))
    return tree


def _enter_own_proc(tree: str) -> None:
    """In the compiler's child, before exec: a user and mount namespace of its own, whose
    /proc is `tree`, read-only. The exec then leaves it no capability (its uid is not
    root there). Where no namespace can be made, nothing changes and the compiler says
    that it found no /proc (the host reports that as the toolchain's failure)."""
    if LIBC.unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0:
        return
    LIBC.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None)
    if LIBC.mount(tree.encode(), b"/proc", None, MS_BIND, None) == 0:
        LIBC.mount(None, b"/proc", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, None)


def spawn(argv: list[str], env: dict[str, str], stdin_fd: int, out_fd: int, err_fd: int, rlimits: Rlimits,
          program_fd: int | None = None, own_proc: str | None = None) -> int:
    """The program as a fresh process in a process group of its own, with fds 0-2 only and
    `rlimits` (`child_limits`) set before its code runs; its pid.

    A program named by path (no `program_fd`, no `own_proc`) starts without a fork of this
    process: posix_spawn (vfork: no copy of this Python's page tables, which in a virtual
    machine costs a fork and its child 2-3 ms of CPU) of the process backend's exec helper
    (for a program named by a path with a slash; sandboxes/exec_helper.py) or else of
    util-linux's prlimit, either of which sets the limits on itself and execs the program.
    Otherwise, and where neither is there, a fork of this process sets them and execs."""
    full_env = {**os.environ, **env}
    if program_fd is None and own_proc is None and "/" in argv[0] and HAS_EXEC_HELPER:
        options = [str(word) for which, (soft, hard) in rlimits for word in (which, soft % 2**64, hard % 2**64)]
        return _posix_spawn(EXEC_HELPER, [EXEC_HELPER, *options, "--", argv[0], *argv], full_env, stdin_fd, out_fd,
                            err_fd)
    if program_fd is None and own_proc is None and os.access(PRLIMIT, os.X_OK):
        return _spawn_limited(argv, full_env, stdin_fd, out_fd, err_fd, rlimits)
    target = argv[0] if program_fd is None else program_fd
    pid = os.fork()
    if pid == 0:  # the child: only fds 0-2, its limits, then the program
        try:
            os.dup2(stdin_fd, 0)
            os.dup2(out_fd, 1)
            os.dup2(err_fd, 2)
            if program_fd is None:
                os.closerange(3, 1024)
            else:  # close-on-exec already: it goes away with the exec
                os.closerange(3, program_fd)
                os.closerange(program_fd + 1, 1024)
            os.setpgid(0, 0)
            signal.signal(signal.SIGPIPE, signal.SIG_DFL)
            for which, pair in rlimits:
                with contextlib.suppress(ValueError, OSError):
                    resource.setrlimit(which, pair)
            if own_proc is not None:
                _enter_own_proc(own_proc)
            os.execve(target, argv, full_env)
        finally:
            os._exit(127)
    return pid


def limits_by_exec() -> bool:
    """Whether a program named by path can start under its limits without a fork of this
    process (`spawn`)."""
    return HAS_EXEC_HELPER or os.access(PRLIMIT, os.X_OK)


def _spawn_limited(argv: list[str], env: dict[str, str], stdin_fd: int, out_fd: int, err_fd: int,
                   rlimits: Rlimits) -> int:
    """posix_spawn of `prlimit --LIMIT=soft:hard ... -- argv`."""
    options = [f"--{PRLIMIT_OPTIONS[which]}={_limit_text(soft)}:{_limit_text(hard)}" for which, (soft, hard) in rlimits]
    return _posix_spawn(PRLIMIT, [PRLIMIT, *options, "--", *argv], env, stdin_fd, out_fd, err_fd)


def _posix_spawn(path: str, argv: list[str], env: dict[str, str], stdin_fd: int, out_fd: int, err_fd: int) -> int:
    """fds 0-2 from the given ones, no other descriptor of this process
    (`_no_descriptor_passed_on`), a process group of its own, SIGPIPE and SIGXFSZ at their
    defaults."""
    _no_descriptor_passed_on()
    actions = [(os.POSIX_SPAWN_DUP2, stdin_fd, 0), (os.POSIX_SPAWN_DUP2, out_fd, 1), (os.POSIX_SPAWN_DUP2, err_fd, 2)]
    return os.posix_spawn(path, argv, env, file_actions=actions, setpgroup=0,
                          setsigdef=(signal.SIGPIPE, signal.SIGXFSZ))


def _limit_text(value: int) -> str:
    return "unlimited" if value == resource.RLIM_INFINITY else str(value)


_cloexec_done_in: int | None = None


def _no_descriptor_passed_on() -> None:
    """Every descriptor of this process from 3 up close-on-exec (the sandbox channel, fd 3,
    is the one that was not; Python makes its own so), so that an exec keeps only 0-2.
    Once per process (a scan of every number up to the open-files limit, without /proc,
    costs more than a small program's run): nothing here makes one inheritable again."""
    global _cloexec_done_in
    if _cloexec_done_in == os.getpid():
        return
    if LIBC.syscall(SYS_CLOSE_RANGE, 3, 0xFFFFFFFF, CLOSE_RANGE_CLOEXEC) == 0:  # one call, where the kernel has it
        _cloexec_done_in = os.getpid()
        return
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    for fd in range(3, 1024 if soft == resource.RLIM_INFINITY else min(soft, 1024)):
        with contextlib.suppress(OSError):
            if os.get_inheritable(fd):
                os.set_inheritable(fd, False)
    _cloexec_done_in = os.getpid()


def _wait_main(pid: int, deadline: float) -> tuple[int | None, Any, float, float]:
    """Wait for the main process until the deadline, reaping any other descendant that
    ends on the way. Returns (status, rusage) of the main process ((None, None) at the
    deadline) and the CPU seconds and peak RSS (MB) of the others reaped."""
    try:
        pidfd: int | None = os.pidfd_open(pid)
    except (OSError, AttributeError):
        pidfd = None
    cpu, peak = 0.0, 0.0
    try:
        while True:
            try:
                got, status, usage = os.wait4(-1, os.WNOHANG)
            except ChildProcessError:  # cannot happen while the main process is ours
                return None, None, cpu, peak
            if got == pid:
                return status, usage, cpu, peak
            if got:
                cpu += usage.ru_utime + usage.ru_stime
                peak = max(peak, usage.ru_maxrss / 1024)
                continue
            left = deadline - time.monotonic()
            if left <= 0:
                return None, None, cpu, peak
            if pidfd is not None:
                select.select([pidfd], [], [], min(left, 0.05))
            else:
                time.sleep(min(left, POLL_S))
    finally:
        if pidfd is not None:
            os.close(pidfd)


def _reap_all(group: int) -> tuple[float, float]:
    """Kill what the program left and reap it: (CPU seconds, peak RSS in MB) of the rest.

    As PID 1 of a namespace (the process backend) everything but us is the program's, so
    all of it is killed and counted. Elsewhere (a container's job uid) its process group is
    killed here and anything that left the group is killed by the sandbox at the job's end:
    what such a process used before is counted when it ended while the program ran."""
    with contextlib.suppress(OSError):
        os.kill(-1 if os.getpid() == 1 else -group, signal.SIGKILL)
    return reap_children()


def reap_children() -> tuple[float, float]:
    """Reap every remaining child (orphans come to us as subreaper or PID 1): (CPU seconds,
    peak RSS in MB) of them. A process that will not die within REAP_GRACE_S is left."""
    cpu, peak = 0.0, 0.0
    give_up = time.monotonic() + REAP_GRACE_S
    while True:
        try:
            pid, _, usage = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            return cpu, peak
        except InterruptedError:
            continue
        if pid == 0:
            if time.monotonic() >= give_up:
                return cpu, peak
            time.sleep(POLL_S)
            continue
        cpu += usage.ru_utime + usage.ru_stime
        peak = max(peak, usage.ru_maxrss / 1024)


def describe_exit(status: int | None, usage: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"exit_code": None, "signal": None, "cpu_s": 0.0, "peak_memory_mb": 0.0}
    if status is not None:
        if os.WIFEXITED(status):
            out["exit_code"] = os.WEXITSTATUS(status)
        elif os.WIFSIGNALED(status):
            out["signal"] = os.WTERMSIG(status)
    if usage is not None:
        out["cpu_s"] = usage.ru_utime + usage.ru_stime
        out["peak_memory_mb"] = usage.ru_maxrss / 1024
    return out


def _run(argv: list[str], env: dict[str, str], stdin_fd: int, out_fd: int, err_fd: int, wall_s: float,
         cpu_s: float | None, address_space_mb: int | None, stack_mb: int | None,
         program_fd: int | None = None, own_proc: str | None = None,
         more: dict[str, Any] | None = None) -> dict[str, Any]:
    become_subreaper()
    started = time.monotonic()
    pid = spawn(argv, env, stdin_fd, out_fd, err_fd, child_limits(cpu_s, address_space_mb, stack_mb, more),
                program_fd, own_proc)
    status, usage, early_cpu, early_peak = _wait_main(pid, started + wall_s)
    wall = time.monotonic() - started
    result = describe_exit(status, usage)
    rest_cpu, rest_peak = _reap_all(pid)
    rest_cpu, rest_peak = rest_cpu + early_cpu, max(rest_peak, early_peak)
    if status is None:
        result["killed_by"] = "timeout"
    result["cpu_s"] += rest_cpu
    result["peak_memory_mb"] = max(result["peak_memory_mb"], rest_peak)
    result["wall_s"] = wall
    return result


def compile_source(payload: dict[str, Any], channel: Any) -> dict[str, Any]:
    """Compile: payload {"files": {name: text}, "argv": [...], "env": {...},
    "artifacts": [glob, ...], "wall_s": float, "needs_own_exe": bool (the compiler reads
    /proc/self/exe)}. The compiler's messages go to a file
    (bounded by the job's file-size limit), of which the first MESSAGE_BYTES come back."""
    result, artifacts = compile_here(payload)
    # The artifacts go out on stdout (captured in full by the sandbox, drained even after
    # this process exits), the small report as the call's value.
    for _, data in artifacts:
        write_out(data)
    return result


def write_out(data: bytes) -> None:
    write_all(1, data)


def compile_here(payload: dict[str, Any]) -> tuple[dict[str, Any], list[tuple[str, bytes]]]:
    """Compile in the working directory (payload as `compile_source`'s, and "limits": the
    compiler's own, see `child_limits`, where the job's are wider):
    (the report, [(artifact name, bytes)])."""
    write_files(payload["files"], binary=False)
    argv = list(payload["argv"])
    if payload.get("testlib"):  # the vendored testlib.h, next to this file
        argv.insert(1, "-I" + os.path.join(os.path.dirname(os.path.abspath(__file__)), "testlib"))
    own_proc = own_proc_tree(argv[0]) if payload.get("needs_own_exe") else None
    stdin_fd = os.open(os.devnull, os.O_RDONLY)
    log_fd = os.open(COMPILE_LOG, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    result = _run(argv, dict(payload.get("env") or {}), stdin_fd, log_fd, log_fd,
                  float(payload["wall_s"]), None, None, None, own_proc=own_proc, more=payload.get("limits"))
    os.close(log_fd)
    os.close(stdin_fd)
    with open(COMPILE_LOG, "rb") as f:
        message = f.read(MESSAGE_BYTES)
    artifacts: list[tuple[str, bytes]] = []
    total = 0
    if result.get("exit_code") == 0 and not result.get("killed_by"):
        for pattern in payload.get("artifacts") or []:
            for name in sorted(glob.glob(pattern)):
                with open(name, "rb") as f:
                    data = f.read(MAX_ARTIFACT_BYTES + 1)
                total += len(data)
                if total > MAX_ARTIFACT_BYTES:
                    result["too_large"] = True
                    break
                artifacts.append((name, data))
    if result.get("too_large"):
        artifacts = []
    result["message"] = message.decode("utf-8", errors="replace")
    result["artifacts"] = [[name, len(data)] for name, data in artifacts]
    return result, artifacts


def program_descriptor(argv: list[str], files: dict[str, str] | dict[str, bytes],
                       executables: list[str]) -> int | None:
    """A compiled program runs from a memfd (fexecve): a container's scratch is noexec.
    None for a program that an interpreter or a runtime named in argv[0] runs."""
    main = argv[0][2:] if argv[0].startswith("./") else None
    if main is None or main not in executables:
        return None
    program_fd = os.memfd_create("program", os.MFD_CLOEXEC)
    data = files[main]
    write_all(program_fd, data if isinstance(data, bytes) else base64.b64decode(data))
    return program_fd


def run_program(payload: dict[str, Any], channel: Any) -> dict[str, Any]:
    """Run: payload {"files": {name: base64}, "executables": [name], "argv": [...],
    "env": {...}, "stdin": text, "wall_s", "cpu_s", "address_space_mb" (or null),
    "stack_mb" (or null)}. The program's stdout/stderr are the job's own."""
    files = payload.get("files") or {}
    write_files(files, binary=True)
    for name in payload.get("executables") or []:
        os.chmod(name, 0o755)
    argv = list(payload["argv"])
    program_fd = program_descriptor(argv, files, list(payload.get("executables") or []))
    # A file or memfd serves any size of input without a writer that could block.
    stdin_fd = stdin_descriptor((payload.get("stdin") or "").encode())
    return _run(argv, dict(payload.get("env") or {}), stdin_fd, 1, 2,
                float(payload["wall_s"]), payload.get("cpu_s"), payload.get("address_space_mb"),
                payload.get("stack_mb"), program_fd)

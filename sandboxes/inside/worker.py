"""Warm worker that runs *inside* a sandbox (standard library only).

The trusted host starts one of these per pool slot inside an outer sandbox (bubblewrap
or a container). It pre-imports the pool's modules once, then for each job:

  worker (zygote) --fork--> supervisor --fork--> job

The supervisor is trusted: it walls the job in, relays framed messages between the host
and the job, caps output, enforces the wall clock and reports usage. Only the supervisor
speaks to the host. How the job is walled in depends on the worker's mode (an
`Isolation`):

- namespaces (default): the job is PID 1 of fresh user, PID, mount and IPC namespaces,
  with a fresh tmpfs scratch at /tmp and a /proc of no process (read-only, holding only
  the link self/fd -> JOB_FD_DIR, which the job fills). When it exits the kernel kills
  everything it started, so a fork bomb or a `setsid` escapee cannot outlive the job.
- container (`--container=UID`, the docker backend): Docker's seccomp profile forbids
  `unshare`, so the job gets no new namespaces; it gets a uid of its own instead. The
  worker is PID 1 of its container and runs as root with only CAP_SETUID, CAP_SETGID,
  CAP_SETPCAP and CAP_KILL; each supervisor keeps only CAP_KILL once it has forked the
  job, and the job drops to UID with no capability at all, so nothing a job runs can
  signal, renice or `prlimit` its supervisor or the worker. When the job ends the
  supervisor kills every process but PID 1 and itself (`kill(-1)`); the worker kills
  anything left, has a helper that is UID remove the jobs' files and IPC objects,
  wipes the rest of what jobs can write (/tmp, /dev/shm, /dev/mqueue), checks that
  nothing is left, and reports `clean` before it takes the next job. The container
  itself supplies no network, a read-only root and no other capability.
- unsafe (`--unsafe`, the operator's explicit choice where no namespaces can be made):
  rlimits, a private scratch directory and the job's own process group, nothing else.

The protocol channel cannot be used against the host. Before the job's code runs it
holds exactly four descriptors: stdin, stdout and stderr pipes to the supervisor and the
channel socket (fd 3, closed for commands). Every frame names the job's nonce; the
supervisor reads the channel without ever blocking, so junk, a forged or oversized
frame, a half-written frame or a flood cannot stall its clock, and it reports such
tampering as the job's violation. Frames are a 4-byte big-endian length and UTF-8 JSON.

Between jobs, in every mode, the worker compares its own state (rlimits, priority, CPU
affinity, OOM score) with the state it started with; a worker whose state changed
ends, and the host replaces it.
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import errno
import fcntl
import importlib
import os
import resource
import select
import shutil
import signal
import socket
import sys
import tempfile
import time
import traceback
from typing import Any, NoReturn

# Run as a script with -I: make the package importable from the mount root.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from sandboxes.frames import (  # noqa: E402
    CPU_WAIT_CREDIT_MAX_S,
    JOB_MAX_FRAME,
    RELAY_MAX_FRAME,
    FrameError,
    FrameReader,
    FrameWriter,
    done_frame_limit,
    encode_frame,
    read_frame,
    write_frame,
)

SCRATCH = "/tmp/work"
# Namespace mode: the job's /proc/self/fd, which /dev/stdin, /dev/stdout and /dev/fd/N lead
# through, is a link to this directory of its own scratch. The job fills it (a code runner
# puts its program's stdin there as `0`); the sandbox puts nothing in it.
JOB_FD_DIR = SCRATCH + "/.assay-fd"
STDIN_FD, STDOUT_FD, STDERR_FD, CHANNEL_FD = 0, 1, 2, 3
# Descriptors closed one by one where /proc/self/fd cannot be listed.
FALLBACK_MAX_FD = 4096
# Exit code of a job whose set-up failed before the target ran (sysexits EX_SOFTWARE).
JOB_SETUP_FAILED = 70
# A SIGKILL the supervisor did not send, after this share of the CPU budget, was the CPU
# rlimit. Not 1.0: under contention rusage reads up to ~20% below what the rlimit counted.
CPU_KILL_SHARE = 0.75
# rlimits take whole seconds; round a fractional budget up, never down to zero.
CPU_ROUND_UP = 0.999
# RLIMIT_NPROC counts the supervisor and job's own processes too.
NPROC_HEADROOM = 4
# A MemoryError traceback ends the job's stderr: look this far back for it.
STDERR_TAIL_SCAN = 4000
CAPTURE_CHUNK = 65536
# Bounded, so a hostile exception message cannot make the result frame huge.
RAISED_MESSAGE_CHARS = 2000
VIOLATION_CHARS = 200
# How long the supervisor keeps reading a frame the host is still writing after the job
# ended, so that the idle worker never starts reading in the middle of a frame.
HOST_FRAME_DRAIN_S = 2.0
# A job that waited for a CPU because other jobs held them (its runqueue wait) gets that
# time back on its wall clock, up to CPU_WAIT_CREDIT_MAX_S: its verdict must not depend on
# its neighbours. Sleeping earns nothing. Graders and interactors wait 5 s past the
# candidate's clock, which covers it.
# Credit smaller than this is not worth another round of the loop.
CPU_WAIT_CREDIT_MIN_S = 0.01
# Poll interval once the wall clock has run out and the kill is on its way.
KILL_POLL_S = 0.01
DEFAULT_SCRATCH_MB = 64
# Container mode: every place a job can write, wiped after each job.
CONTAINER_WRITABLE = ("/tmp", "/dev/shm", "/dev/mqueue")
CONTAINER_CLEANUP_S = 5.0
IPC_RMID = 0

CLONE_NEWNS = 0x00020000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
MS_RDONLY = 0x1
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_NOEXEC = 0x8
MS_REMOUNT = 0x20
MS_REC = 0x4000
MS_PRIVATE = 1 << 18
PR_SET_DUMPABLE = 4
PR_CAPBSET_DROP = 24
CAP_KILL = 5
CAP_SETPCAP = 8
# Capability numbers tried when emptying the bounding set (unknown ones fail harmlessly).
CAP_LAST_PROBE = 64
JOB_PATH = "/usr/local/bin:/usr/bin:/bin"

# Words the host shows for failures of the sandbox itself (never an exception's text).
TAMPERED_CHANNEL = "the job wrote a malformed or forged frame on its protocol channel"
OVERSIZED_RESULT = "the job's result was over its channel's size limit"
# Ids of the job's asks: what the host echoes back, so only small integers.
MAX_ASK_ID = 2**53

_libc = ctypes.CDLL(None, use_errno=True)


def _worker_state() -> tuple:
    """What a job must not be able to change about the worker that outlives it."""
    limits = tuple(resource.getrlimit(getattr(resource, name)) for name in sorted(dir(resource))
                   if name.startswith("RLIMIT_"))
    try:
        with open("/proc/self/oom_score_adj") as f:
            oom = f.read().strip()
    except OSError:
        oom = None
    return limits, os.getpriority(os.PRIO_PROCESS, 0), sorted(os.sched_getaffinity(0)), oom


def _check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _mount(source: str, target: str, fstype: str, flags: int, data: str = "") -> None:
    _check(
        _libc.mount(source.encode(), target.encode(), fstype.encode(), flags, data.encode() or None),
        f"mount {target}",
    )


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def _drop_capabilities(keep: int = 0) -> None:
    """Effective and permitted capabilities down to the mask `keep` (none by default)."""
    header = _CapHeader(0x20080522, 0)
    data = (_CapData * 2)()
    data[0].effective = data[0].permitted = keep
    _check(_libc.capset(ctypes.byref(header), ctypes.byref(data)), "capset")


# ---------------------------------------------------------------------- isolation


class Isolation:
    """How one worker mode walls a job in. The base is the unsafe mode's floor."""

    name = "unsafe"

    def __init__(self) -> None:
        self.initial_state = _worker_state()

    def job_started(self) -> None:
        """In the supervisor, right after it forked the job: what it keeps from here on."""

    def make_scratch(self, limits: dict) -> str:
        """In the supervisor, before the job: the job's working directory."""
        return tempfile.mkdtemp(prefix="assay-job-")

    def wall_in_job(self) -> None:
        """In the job, before its code: what this mode adds to rlimits and a session."""

    def limit_scratch(self, size_mb: int) -> bool:
        """In the supervisor, at the job's request: shrink its scratch (only where this
        mode sizes a scratch per job: namespaces; elsewhere nothing to do)."""
        return True

    def after_job_exit(self, pid: int) -> None:
        """In the supervisor, once the job's main process exited: end what it started.
        Only the job's process group: a `setsid` escapee survives (unsafe)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)

    def remove_scratch(self, scratch: str) -> None:
        shutil.rmtree(scratch, ignore_errors=True)

    def await_supervisor(self, pid: int, host_out: int, nonce: str) -> None:
        """In the worker: wait for the supervisor and report a failure it could not."""
        _, status = os.waitpid(pid, 0)
        if not (os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0):
            _report_supervisor_failure(host_out, nonce, status)

    def between_jobs(self, host_out: int) -> bool:
        """In the worker, after each job; False ends the worker (the host replaces it)."""
        return self.unchanged()

    def unchanged(self) -> bool:
        """Whether the worker's own state is what it started with."""
        now = _worker_state()
        if now != self.initial_state:
            print(f"worker state changed during a job: {self.initial_state} -> {now}", file=sys.stderr)
            return False
        return True


class NamespaceIsolation(Isolation):
    name = "namespaces"

    def make_scratch(self, limits: dict) -> str:
        uid, gid = os.getuid(), os.getgid()
        # The worker is non-dumpable; /proc/self/*_map are only writable when dumpable.
        # The job cannot see this process anyway (own PID namespace and /proc).
        _libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)
        _check(_libc.unshare(CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWIPC), "unshare")
        with open("/proc/self/setgroups", "w") as f:
            f.write("deny")
        with open("/proc/self/uid_map", "w") as f:
            f.write(f"{uid} {uid} 1")
        with open("/proc/self/gid_map", "w") as f:
            f.write(f"{gid} {gid} 1")
        _libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
        _mount("none", "/", "", MS_REC | MS_PRIVATE)
        scratch_mb = int(limits.get("scratch_mb", DEFAULT_SCRATCH_MB))
        _mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, f"size={scratch_mb}m,mode=0755")
        os.mkdir(SCRATCH, 0o755)
        self.scratch_mb = scratch_mb
        return SCRATCH

    def limit_scratch(self, size_mb: int) -> bool:
        if size_mb >= self.scratch_mb:
            return True
        # The same superblock as the job's /tmp (one mount namespace), owned by this user
        # namespace, which the job holds no capability in: it cannot grow it back.
        flags = MS_REMOUNT | MS_NOSUID | MS_NODEV
        if _libc.mount(b"tmpfs", b"/tmp", b"tmpfs", flags, f"size={size_mb}m".encode()) != 0:
            return False  # more than that is in use
        self.scratch_mb = size_mb
        return True

    def wall_in_job(self) -> None:
        # A fresh procfs cannot be mounted under bwrap's partly read-only /proc, so the
        # job gets a /proc of its own: it sees no process, and its PID namespace keeps it
        # from addressing any process outside. It holds one link, self/fd -> JOB_FD_DIR,
        # so that a program opening /dev/stdin finds what its runner put there (a program
        # that reads `/dev/stdin` instead of fd 0 is common in contest code); read-only.
        flags = MS_NOSUID | MS_NODEV | MS_NOEXEC
        _mount("none", "/proc", "tmpfs", flags, "size=16k,mode=0555")
        os.mkdir("/proc/self", 0o555)
        os.symlink(JOB_FD_DIR, "/proc/self/fd")
        _mount("none", "/proc", "", MS_REMOUNT | MS_RDONLY | flags)

    def after_job_exit(self, pid: int) -> None:
        pass  # the end of the PID namespace killed everything the job started

    def remove_scratch(self, scratch: str) -> None:
        pass  # the tmpfs dies with the supervisor's mount namespace


class ContainerIsolation(Isolation):
    name = "container"

    def __init__(self, job_uid: int) -> None:
        super().__init__()
        self.job_uid = job_uid

    def make_scratch(self, limits: dict) -> str:
        # The worker wiped /tmp after the previous job; the directory is new, root's, and
        # open to the job (its files there are its own; the worker removes the rest).
        os.mkdir(SCRATCH)
        os.chmod(SCRATCH, 0o1777)
        return SCRATCH

    def job_started(self) -> None:
        # The supervisor stays root (the job's uid cannot signal it) with CAP_KILL alone:
        # enough to end the job and everything it started.
        for cap in range(CAP_LAST_PROBE):
            if cap not in (CAP_KILL, CAP_SETPCAP):
                _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
        _libc.prctl(PR_CAPBSET_DROP, CAP_SETPCAP, 0, 0, 0)
        _drop_capabilities(1 << CAP_KILL)

    def wall_in_job(self) -> None:
        # If the container's memory limit is hit, a process of the job and not the worker
        # dies (set while still root; then the job is its own uid, without capabilities).
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write("1000")
        _become(self.job_uid)
        signal.signal(signal.SIGINT, signal.default_int_handler)

    def after_job_exit(self, pid: int) -> None:
        # What a PID namespace's end does in process mode: nothing the job started
        # outlives it (kill(-1) spares only PID 1 and the caller).
        _kill_all_but_init()

    def remove_scratch(self, scratch: str) -> None:
        pass  # the worker wipes every writable place between jobs

    def await_supervisor(self, pid: int, host_out: int, nonce: str) -> None:
        """The job can name its supervisor here (in namespace mode it cannot), though as
        another uid it cannot signal it. A supervisor stopped or killed while its job ran
        was attacked by the job: the job's violation, not an infrastructure failure.
        (The host replaces the container after a violation.)"""
        _, status = os.waitpid(pid, os.WUNTRACED)
        # Nothing but the job signals the supervisor (the OOM killer is pointed at the job).
        tampered = os.WIFSTOPPED(status) or os.WIFSIGNALED(status)
        if os.WIFSTOPPED(status):
            _kill_all_but_init()
            os.waitpid(pid, 0)
        if tampered:
            write_frame(host_out, {"t": "done", "n": nonce, "exit_code": None, "signal": None, "killed_by": None,
                                   "violations": ["the job signalled its sandbox supervisor"], "outcome": {},
                                   "retire": True})
        elif not (os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0):
            _report_supervisor_failure(host_out, nonce, status)

    def between_jobs(self, host_out: int) -> bool:
        # The host waits for this before it releases the container for the next job; a
        # failed cleanup ends the worker so that the host replaces the container.
        try:
            _container_cleanup(self.job_uid)
        except Exception:
            traceback.print_exc()
            write_frame(host_out, {"t": "clean", "ok": False})
            return False
        ok = self.unchanged()
        write_frame(host_out, {"t": "clean", "ok": ok})
        return ok


def _report_supervisor_failure(host_out: int, nonce: str, status: int) -> None:
    # The traceback went to stderr (the operator's log); the host gets a stable word.
    write_frame(host_out, {"t": "done", "n": nonce, "infrastructure_error": "supervisor_failed",
                           "status": status})


# --------------------------------------------------------------------------- job side


class Channel:
    """What a called function uses to talk to the trusted host during a job."""

    def __init__(self, fd: int, nonce: str) -> None:
        self._fd = fd
        self._nonce = nonce
        self._next_id = 0
        self._early: list[dict] = []  # frames read while waiting for another

    def send(self, frame: dict) -> None:
        """FrameError, and nothing sent, when the frame is over the channel's limits."""
        write_frame(self._fd, {**frame, "n": self._nonce}, JOB_MAX_FRAME)

    def ask(self, body: object) -> object:
        """Send `body` to the host's message handler and return its answer."""
        return self.ask_soon(body)()

    def ask_soon(self, body: object):
        """Send `body` to the host's message handler now; the function returned waits for
        its answer (the job works on meanwhile)."""
        self._next_id += 1
        ask_id = self._next_id
        self.send({"t": "ask", "id": ask_id, "body": body})
        return lambda: self._wait(lambda f: f.get("t") == "ans" and f.get("id") == ask_id).get("body")

    def limit_scratch(self, size_mb: int) -> bool:
        """Ask the supervisor to shrink the job's scratch to `size_mb` from here on (a job
        that compiles, then runs a program under a smaller scratch). Only ever smaller;
        False where it could not be done (more than that is in use)."""
        self.send({"t": "scratch", "mb": int(size_mb)})
        return self._wait(lambda f: f.get("t") == "scratch").get("ok") is True

    def _wait(self, wanted) -> dict:
        for frame in self._early:
            if wanted(frame):
                self._early.remove(frame)
                return frame
        while True:
            frame = read_frame(self._fd)
            if wanted(frame):
                return frame
            if frame.get("t") in ("ans", "scratch"):
                self._early.append(frame)

    def serve(self, handler) -> None:
        """Answer the host's requests with `handler(body)` until the host says finish."""
        while True:
            frame = read_frame(self._fd)
            kind = frame.get("t")
            if kind == "finish":
                return
            if kind == "req":
                try:
                    self.send({"t": "ans", "id": frame.get("id"), "body": handler(frame.get("body"))})
                except FrameError:  # an answer too big for the channel: an empty one instead
                    self.send({"t": "ans", "id": frame.get("id"), "body": None})


def _apply_limits(limits: dict) -> None:
    mem = int(limits["memory_mb"]) * 1024 * 1024
    # Soft == hard: the kernel then sends SIGKILL, which even a namespace's PID 1 gets.
    cpu = max(1, int(float(limits["cpu_s"]) + CPU_ROUND_UP))
    fsize = int(limits["file_size_mb"]) * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
    resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
    resource.setrlimit(resource.RLIMIT_NOFILE, (int(limits["open_files"]),) * 2)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if os.getuid() != 0:
        # Counted per user: the host gives each worker its own uid when it can.
        nproc = int(limits["processes"]) + NPROC_HEADROOM
        resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))


def _renumber_descriptors(stdin_fd: int, out_fd: int, err_fd: int, chan_fd: int, keep_channel: bool) -> None:
    """Leave the job exactly fds 0-2 (and 3, the channel, for calls): nothing it inherits
    by accident (the host pipes, the worker's files) is in reach of its code."""
    # Move them above the targets first, so no dup2 overwrites one still to be moved.
    high = [fcntl.fcntl(fd, fcntl.F_DUPFD, CHANNEL_FD + 1) for fd in (stdin_fd, out_fd, err_fd, chan_fd)]
    for target, fd in zip((STDIN_FD, STDOUT_FD, STDERR_FD, CHANNEL_FD), high, strict=True):
        os.dup2(fd, target)
    first_closed = CHANNEL_FD + 1 if keep_channel else CHANNEL_FD
    # Only the open ones: closerange() over a container's million-fd limit falls back to
    # one close() each where seccomp refuses close_range, which costs the job a second.
    try:
        open_fds = [int(name) for name in os.listdir("/proc/self/fd")]
    except OSError:
        open_fds = list(range(FALLBACK_MAX_FD))
    for fd in open_fds:
        if fd >= first_closed:
            with contextlib.suppress(OSError):
                os.close(fd)


def _exit_watch(pid: int) -> tuple[int, Any]:
    """A descriptor that turns readable when the child `pid` may have exited, and a check.

    A pidfd where the kernel has one. gVisor's (runsc) has no pidfd_open: there SIGCHLD
    wakes a pipe instead (signal.set_wakeup_fd), and waitid(WNOWAIT) says whether the
    child really exited without reaping it (`_report` reaps it for its resource usage)."""
    try:
        return os.pidfd_open(pid), lambda: True
    except OSError as exc:
        if exc.errno != errno.ENOSYS:
            raise
    read_end, write_end = os.pipe()
    for fd in (read_end, write_end):
        os.set_blocking(fd, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(write_end)
    os.write(write_end, b"\0")  # check once: the child may have exited before the handler was set

    def exited() -> bool:
        with contextlib.suppress(BlockingIOError):
            while os.read(read_end, 4096):
                pass
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None

    return read_end, exited


def _job_environment(spec: dict, scratch: str) -> dict[str, str]:
    env = {"PATH": JOB_PATH, "HOME": scratch, "LANG": "C.UTF-8", "TMPDIR": scratch}
    env.update(spec.get("env") or {})
    os.environ.clear()
    os.environ.update(env)
    return env


def _call_target(spec: dict) -> None:
    """Call `module:function(payload, channel)` and send its result on the channel."""
    nonce = spec["nonce"]
    sys.stdout = open(STDOUT_FD, "w", closefd=False)  # noqa: SIM115
    sys.stderr = open(STDERR_FD, "w", closefd=False)  # noqa: SIM115
    module_name, func_name = spec["target"].split(":")
    func = getattr(importlib.import_module(module_name), func_name)
    try:
        value = func(spec.get("payload"), Channel(CHANNEL_FD, nonce))
        frame: dict[str, Any] = {"t": "result", "value": value}
    except BaseException as exc:  # the function's own failure is data for the host
        frame = {"t": "raised", "type": type(exc).__name__, "message": str(exc)[:RAISED_MESSAGE_CHARS]}
        traceback.print_exc()
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        data = encode_frame({**frame, "n": nonce}, JOB_MAX_FRAME)
    except (TypeError, ValueError, RecursionError, MemoryError):
        data = encode_frame({"t": "raised", "n": nonce, "type": "Unencodable",
                             "message": "the return value is not JSON data"})
    while data:
        data = data[os.write(CHANNEL_FD, data) :]


def _job_main(spec: dict, isolation: Isolation, scratch: str, fds: tuple[int, int, int, int]) -> NoReturn:
    """The job process (in namespace mode, PID 1 of its namespace). Never returns."""
    code = JOB_SETUP_FAILED
    try:
        _renumber_descriptors(*fds, keep_channel=spec["mode"] == "call")
        # Own session and process group: kill(0, ...) must not reach the supervisor.
        os.setsid()
        os.chdir(scratch)
        isolation.wall_in_job()
        # CPython ignores these; commands the job runs would inherit that.
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
        signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
        env = _job_environment(spec, scratch)
        _apply_limits(spec["limits"])
        _drop_capabilities()
        if spec["mode"] in ("exec", "stream"):
            os.execvpe(spec["argv"][0], spec["argv"], env)
        _call_target(spec)
        code = 0
    except BaseException:
        traceback.print_exc()
    finally:
        os._exit(code)


# ----------------------------------------------------------------------- supervisor


def _write_files(scratch: str, files: dict) -> None:
    for name, b64 in files.items():
        path = os.path.normpath(os.path.join(scratch, name))
        if not path.startswith(scratch + "/"):
            raise ValueError(f"file name escapes the scratch directory: {name!r}")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(base64.b64decode(b64))


class _Capture:
    """The job's stdout or stderr, kept up to a cap."""

    def __init__(self, fd: int, cap: int) -> None:
        self.fd, self.cap, self.data, self.truncated = fd, cap, bytearray(), False

    def pump(self) -> bool:
        """Read what is there; False at EOF or once over the cap."""
        chunk = os.read(self.fd, CAPTURE_CHUNK)
        if not chunk:
            return False
        room = self.cap - len(self.data)
        self.data += chunk[: max(room, 0)]
        if len(chunk) > room:
            self.truncated = True
            return False
        return True

    def drain(self) -> None:
        """After the job's end: what is left in the pipe (non-blocking)."""
        with contextlib.suppress(BlockingIOError):
            while self.pump():
                pass


class JobSupervisor:
    """Runs one job in a fork of the worker: start it, relay, enforce, report.

    The loop never blocks on the job: every descriptor it reads or writes is
    non-blocking, and it reads the channel only while nothing waits to go out, so a job
    that floods or stops reading stalls itself, never the clock."""

    def __init__(self, spec: dict, host_in: int, host_out: int, isolation: Isolation) -> None:
        self.spec = spec
        self.limits = spec["limits"]
        self.nonce = spec["nonce"]
        self.isolation = isolation
        self.host_in = host_in
        self.host_out = host_out
        self.from_host = FrameReader(host_in)
        # What it relays from the job; its own `done` goes out with a limit of its own.
        self.to_host = FrameWriter(host_out, RELAY_MAX_FRAME)
        self.killed_by: str | None = None
        self.violations: list[str] = []
        self.outcome: dict = {}
        self.retire = False

    def run(self) -> None:
        scratch = self.isolation.make_scratch(self.limits)
        try:
            _write_files(scratch, self.spec.get("files") or {})
            self._start_job(scratch)
            self._relay_until_exit()
            self._collect_leftovers()
            done = self._report()
        finally:
            self.isolation.remove_scratch(scratch)
        self._send_final(done)

    # -- steps

    def _start_job(self, scratch: str) -> None:
        stdin_r, self.stdin_w = os.pipe()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        sup_sock, job_sock = socket.socketpair()
        # From here on, whatever fails is the job's: the host is told that it started.
        write_frame(self.host_out, {"t": "started", "n": self.nonce})
        # The job hides /proc (in namespace mode, from this process too): keep a way in to
        # read how long it waits for a CPU. The job closes its copy before its code runs.
        self.proc_dir = os.open("/proc", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        self.started = time.monotonic()
        self.pid = os.fork()
        if self.pid == 0:
            sup_sock.close()
            for fd in (self.stdin_w, out_r, err_r, self.host_in, self.host_out):
                os.close(fd)
            _job_main(self.spec, self.isolation, scratch, (stdin_r, out_w, err_w, job_sock.detach()))
        self.isolation.job_started()
        for fd in (stdin_r, out_w, err_w):
            os.close(fd)
        job_sock.close()
        self.chan = sup_sock.detach()
        cap = int(self.limits["output_bytes"])
        self.stdout, self.stderr = _Capture(out_r, cap), _Capture(err_r, cap)
        self.stdin_data = base64.b64decode(self.spec.get("stdin") or "")
        # A stream job's stdin stays open for what the host relays (`in` frames) until the
        # host says eof; its stdout goes to the host as `out` frames while it runs.
        self.stream = self.spec["mode"] == "stream"
        self.stdin_eof = not self.stream
        self.stdin_closed = False
        self.streamed = 0
        for fd in (self.chan, self.stdin_w, out_r, err_r, self.host_in, self.host_out):
            os.set_blocking(fd, False)
        self._maybe_close_stdin()
        self.from_job = FrameReader(self.chan, JOB_MAX_FRAME)
        self.to_job = FrameWriter(self.chan)
        self.chan_open = True
        self.pidfd, self._has_exited = _exit_watch(self.pid)
        self.deadline = self.started + float(self.limits["wall_s"])
        self.cpu_wait_credit = 0.0
        self.exited = False

    def _relay_until_exit(self) -> None:
        captures = {self.stdout.fd: self.stdout, self.stderr.fd: self.stderr}
        open_outputs = set(captures)
        while not self.exited:
            now = time.monotonic()
            if now >= self.deadline and not (self.killed_by is None and self._credit_cpu_wait()):
                self._kill("timeout")
            # Backpressure: a stream job's next output is read once the last is out.
            reads = [self.pidfd, *(fd for fd in open_outputs
                                   if not (self.stream and fd == self.stdout.fd and self.to_host.pending))]
            if not self.from_host.eof:
                reads.append(self.host_in)
            # Backpressure: take the job's next frame only once the last one is out.
            if self.chan_open and not self.to_host.pending and not self.to_job.pending:
                reads.append(self.chan)
            writes = [fd for fd, busy in ((self.stdin_w, bool(self.stdin_data)),
                                          (self.chan, self.chan_open and bool(self.to_job.pending)),
                                          (self.host_out, bool(self.to_host.pending))) if busy]
            readable, writable, _ = select.select(reads, writes, [], max(self.deadline - now, KILL_POLL_S))
            for fd in writable:
                self._on_writable(fd)
            for fd in readable:
                if fd == self.pidfd and self._has_exited():
                    self.exited = True
                    self.isolation.after_job_exit(self.pid)
                elif fd == self.stdout.fd and self.stream:
                    if not self._stream_out():
                        open_outputs.discard(fd)
                elif fd in captures:
                    if not captures[fd].pump():
                        open_outputs.discard(fd)
                        if captures[fd].truncated:
                            self._kill("output")
                elif fd == self.chan:
                    self._on_job_readable()
                elif fd == self.host_in:
                    self._on_host_readable()

    def _collect_leftovers(self) -> None:
        """After the job's exit: what it wrote before it died, and the host's frame in flight."""
        if self.stream:
            with contextlib.suppress(BlockingIOError, OSError):
                while self._stream_out():
                    pass
        else:
            self.stdout.drain()
        self.stderr.drain()
        with contextlib.suppress(OSError):
            self._drain_channel()
        # The idle worker reads the host pipe frame by frame: leave it at a boundary.
        give_up = time.monotonic() + HOST_FRAME_DRAIN_S
        while not self.from_host.at_boundary() and not self.from_host.eof:
            if not select.select([self.host_in], [], [], max(give_up - time.monotonic(), 0))[0]:
                self.retire = True  # the host stopped mid-frame: this worker is out of step
                break
            self.from_host.fill()

    def _drain_channel(self) -> None:
        """The frames the job wrote just before it ended. A result larger than the socket's
        buffer is still in the socket when the job has gone (its last write returned once
        the rest fitted in the buffer): read on until the result is in, the channel's EOF,
        or a short deadline (a process that outlived the job, in unsafe mode, may hold the
        socket open). Bounded like the loop: a frame at most JOB_MAX_FRAME, the next read
        only once what was relayed is out."""
        give_up = time.monotonic() + HOST_FRAME_DRAIN_S
        while self.chan_open and not self.outcome:
            left = give_up - time.monotonic()
            if left <= 0:
                return
            if self.to_host.pending:
                if select.select([], [self.host_out], [], left)[1]:
                    self.to_host.flush()
                continue
            if not select.select([self.chan], [], [], left)[0]:
                return
            self._on_job_readable()

    def _report(self) -> dict:
        _, status, usage = os.wait4(self.pid, 0)
        cpu_s = usage.ru_utime + usage.ru_stime
        exit_code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else None
        sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
        stderr = bytes(self.stderr.data)
        self._classify_end(sig, cpu_s, stderr)
        return {
            "t": "done",
            "n": self.nonce,
            "exit_code": exit_code,
            "signal": sig,
            "stdout": base64.b64encode(bytes(self.stdout.data)).decode(),
            "stderr": base64.b64encode(stderr).decode(),
            "stdout_truncated": self.stdout.truncated,
            "stderr_truncated": self.stderr.truncated,
            "wall_s": time.monotonic() - self.started,
            "cpu_s": cpu_s,
            "peak_memory_mb": usage.ru_maxrss / 1024,
            "killed_by": self.killed_by,
            "violations": self.violations,
            "outcome": self.outcome,
            "retire": self.retire,
        }

    def _send_final(self, done: dict) -> None:
        os.set_blocking(self.host_out, True)
        os.set_blocking(self.host_in, True)
        self.to_host.limit = done_frame_limit(self.limits["output_bytes"])
        try:
            self.to_host.queue(done)
        except FrameError:  # cannot happen within the limits above; never send it anyway
            self.to_host.queue({**done, "outcome": {}, "stdout": "", "stderr": "",
                                "violations": [*self.violations, OVERSIZED_RESULT]})
        self.to_host.flush()

    def _credit_cpu_wait(self) -> bool:
        """Move the deadline by the CPU wait not credited yet; True if it moved."""
        credit = min(_runqueue_wait_s(self.proc_dir, self.pid), CPU_WAIT_CREDIT_MAX_S)
        if credit - self.cpu_wait_credit < CPU_WAIT_CREDIT_MIN_S:
            return False
        self.deadline += credit - self.cpu_wait_credit
        self.cpu_wait_credit = credit
        return True

    # -- events

    def _kill(self, reason: str | None, violation: str | None = None) -> None:
        if self.killed_by is None:
            self.killed_by = reason
        if violation and violation not in self.violations:
            self.violations.append(violation)
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)

    def _close_channel(self) -> None:
        if self.chan_open:
            self.chan_open = False
            with contextlib.suppress(OSError):
                os.close(self.chan)

    def _on_writable(self, fd: int) -> None:
        if fd == self.stdin_w:
            try:
                self.stdin_data = self.stdin_data[os.write(fd, self.stdin_data[:CAPTURE_CHUNK]) :]
            except BlockingIOError:
                return
            except BrokenPipeError:
                self.stdin_data, self.stdin_eof = b"", True
            self._maybe_close_stdin()
        elif fd == self.chan:
            try:
                self.to_job.flush()
            except OSError:
                self._close_channel()  # the job closed its end: it can only lose answers
        elif fd == self.host_out:
            self.to_host.flush()

    def _maybe_close_stdin(self) -> None:
        if self.stdin_eof and not self.stdin_data and not self.stdin_closed:
            self.stdin_closed = True
            os.close(self.stdin_w)

    def _stream_out(self) -> bool:
        """Send what the stream job wrote to the host; False at its EOF or over the cap."""
        chunk = os.read(self.stdout.fd, CAPTURE_CHUNK)
        room = int(self.limits["output_bytes"]) - self.streamed
        if chunk[:room]:
            self.streamed += len(chunk[:room])
            self.to_host.queue({"t": "out", "n": self.nonce, "data": base64.b64encode(chunk[:room]).decode()})
        if not chunk or len(chunk) > room:
            if chunk:
                self.stdout.truncated = True
                self._kill("output")
            self.to_host.queue({"t": "out", "n": self.nonce, "eof": True})
        with contextlib.suppress(OSError):
            self.to_host.flush()
        return bool(chunk) and len(chunk) <= room

    def _on_stream_input(self, frame: dict) -> None:
        """The host's relay to a stream job's stdin (the peer's output, or its end)."""
        if not self.stream or frame.get("n") != self.nonce or self.stdin_closed:
            return
        self.stdin_data += base64.b64decode(frame.get("data") or "")
        self.stdin_eof = self.stdin_eof or bool(frame.get("eof"))
        self._maybe_close_stdin()

    def _on_job_readable(self) -> None:
        self.from_job.fill()
        try:
            while (frame := self.from_job.next()) is not None:
                self._from_job(frame)
        except FrameError:
            self._tampered(TAMPERED_CHANNEL)
            return
        if self.from_job.eof:
            # A frame cut short by the job's death is not tampering: it just never arrived.
            self._close_channel()

    def _from_job(self, frame: dict) -> None:
        """Relay or keep one frame of the job; FrameError (the job's violation) for a
        forged one, and for one over the limits once re-encoded here."""
        kind = frame.get("t")
        if frame.get("n") != self.nonce or kind not in ("ask", "ans", "result", "raised", "scratch"):
            raise FrameError("forged frame")
        if kind == "scratch":
            size_mb = frame.get("mb")
            if type(size_mb) is not int or size_mb < 1:
                raise FrameError("a scratch size that is not a positive integer")
            if self.chan_open:
                self.to_job.queue({"t": "scratch", "n": self.nonce, "ok": self.isolation.limit_scratch(size_mb)})
                with contextlib.suppress(OSError):
                    self.to_job.flush()
        elif kind in ("ask", "ans"):
            ask_id = frame.get("id")
            if type(ask_id) is not int or not 0 <= ask_id < MAX_ASK_ID:
                raise FrameError("a frame id that is not a small integer")
            self.to_host.queue({"t": kind, "n": self.nonce, "id": ask_id, "body": frame.get("body")})
        elif not self.outcome:
            outcome = {key: frame.get(key) for key in ("t", "value", "type", "message") if key in frame}
            encode_frame(outcome, RELAY_MAX_FRAME)
            self.outcome = outcome

    def _tampered(self, what: str) -> None:
        self._close_channel()
        self._kill(None, what)

    def _on_host_readable(self) -> None:
        self.from_host.fill()
        if self.from_host.eof:
            self._kill(None, "aborted by host")  # the host went away: nobody waits for the job
        try:
            while (frame := self.from_host.next()) is not None:
                if frame.get("t") == "abort":
                    self._kill(None, "aborted by host")
                elif frame.get("t") == "in":
                    self._on_stream_input(frame)
                elif self.chan_open:
                    self.to_job.queue(frame)
                    with contextlib.suppress(OSError):
                        self.to_job.flush()
        except FrameError:
            # The host checks every frame before sending: this stream is out of step.
            self.retire = True
            self.from_host.eof = True
            self._kill(None, "aborted by host")

    def _classify_end(self, sig: int | None, cpu_s: float, stderr: bytes) -> None:
        if self.killed_by is None and sig == signal.SIGXCPU:
            self.killed_by = "cpu"
        if self.killed_by is None and sig == signal.SIGKILL and cpu_s >= CPU_KILL_SHARE * float(self.limits["cpu_s"]):
            self.killed_by = "cpu"
        if self.killed_by is None and sig == signal.SIGXFSZ:
            self.violations.append("file size limit exceeded")
        if self.killed_by is None and (self.outcome.get("type") == "MemoryError"
                                       or b"MemoryError" in stderr[-STDERR_TAIL_SCAN:]):
            self.killed_by = "memory"


# ------------------------------------------------------------------ container mode


def _runqueue_wait_s(proc_dir: int, pid: int) -> float:
    """Seconds `pid` has been runnable but waiting for a CPU; 0.0 where the kernel keeps no count."""
    try:
        fd = os.open(f"{pid}/schedstat", os.O_RDONLY, dir_fd=proc_dir)
        try:
            return int(os.read(fd, 256).split()[1]) / 1e9
        finally:
            os.close(fd)
    except (OSError, ValueError, IndexError):
        return 0.0


def _kill_all_but_init() -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(-1, signal.SIGKILL)


def _reap_and_kill_rest(deadline: float) -> None:
    """As PID 1: kill every other process of the container and reap it (orphans of the
    job were reparented to us). ESRCH from kill(-1) means nobody is left."""
    while True:
        try:
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:
            return
        while True:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
        if time.monotonic() > deadline:
            raise RuntimeError("processes of the previous job would not die")
        time.sleep(0.001)


def _wipe(top: str, strict: bool = True) -> None:
    """Remove everything under `top` (not `top` itself), whatever modes the job set.
    Not strict: skip what this uid may not remove (another uid's pass removes it)."""
    if not os.path.isdir(top):
        return
    stack = [top]
    dirs: list[str] = []
    while stack:  # iterative: a job may nest directories deeper than the recursion limit
        path = stack.pop()
        try:
            entries = list(os.scandir(path))
        except OSError:
            if strict:
                raise
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    os.chmod(entry.path, 0o700)
                    stack.append(entry.path)
                    dirs.append(entry.path)
                else:
                    os.unlink(entry.path)
            except OSError:
                if strict:
                    raise
    for path in reversed(dirs):
        try:
            os.rmdir(path)
        except OSError:
            if strict:
                raise


def _remove_sysv_ipc() -> None:
    """Shared memory, semaphores and message queues outlive processes: remove them."""
    for kind, func in (("shm", "shmctl"), ("sem", "semctl"), ("msg", "msgctl")):
        try:
            with open(f"/proc/sysvipc/{kind}") as f:
                ids = [int(line.split()[1]) for line in f.readlines()[1:] if line.strip()]
        except FileNotFoundError:
            continue
        for ipc_id in ids:
            if kind == "sem":
                _libc.semctl(ipc_id, 0, IPC_RMID)
            else:
                getattr(_libc, func)(ipc_id, IPC_RMID, None)


def _become(uid: int) -> None:
    """Drop from root to `uid` for good: an empty capability bounding set, no groups,
    real, effective and saved ids all `uid` (with no uid 0 left, the kernel clears every
    capability)."""
    for cap in sorted(range(CAP_LAST_PROBE), key=lambda c: c == CAP_SETPCAP):  # SETPCAP last
        _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)


def _as_job_uid(uid: int, work) -> None:
    """Run `work` in a fork that has become the jobs' uid, reaping (as PID 1) whatever
    dies meanwhile; RuntimeError unless it succeeded."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            _become(uid)
            work()
            code = 0
        except BaseException:
            traceback.print_exc()
        os._exit(code)
    deadline = time.monotonic() + CONTAINER_CLEANUP_S
    while True:
        reaped, status = os.waitpid(-1, os.WNOHANG)
        if reaped == pid:
            if not (os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0):
                raise RuntimeError("the cleanup as the jobs' uid failed")
            return
        if reaped == 0:
            if time.monotonic() > deadline:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.001)


def _wipe_what_the_jobs_own() -> None:
    """As the jobs' uid: remove their IPC objects and, as far as it can, their files."""
    _remove_sysv_ipc()
    for top in CONTAINER_WRITABLE:
        _wipe(top, strict=False)


def _leftovers() -> list[str]:
    """What a job may have left that the worker (root, without capabilities over the
    jobs' files) can see: processes, entries in writable places, System V IPC objects."""
    left = [f"process {p}" for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()]
    for top in CONTAINER_WRITABLE:
        if os.path.isdir(top):
            left += [f"{top}/{name}" for name in os.listdir(top)]
    for kind in ("shm", "sem", "msg"):
        with contextlib.suppress(FileNotFoundError), open(f"/proc/sysvipc/{kind}") as f:
            left += [f"{kind} {line.split()[1]}" for line in f.readlines()[1:] if line.strip()]
    return left


def _container_cleanup(job_uid: int) -> None:
    """Everything of the jobs ends: their processes killed (the worker has CAP_KILL),
    their files and IPC objects removed by a helper that is their uid, the rest (the
    root-owned scratch) by the worker; then the worker checks that nothing is left."""
    _reap_and_kill_rest(time.monotonic() + CONTAINER_CLEANUP_S)
    _as_job_uid(job_uid, _wipe_what_the_jobs_own)
    for top in CONTAINER_WRITABLE:
        _wipe(top)
    left = _leftovers()
    if left:
        raise RuntimeError(f"left after cleanup: {left[:5]}")


# ------------------------------------------------------------------------- worker


def _parse_mode(args: list[str]) -> tuple[Isolation, list[str]]:
    """`[--unsafe | --container] PRELOAD` -> the isolation and the modules to preload."""
    isolation: Isolation = NamespaceIsolation()
    if args and args[0] == "--unsafe":
        if os.geteuid() == 0:
            sys.exit("unsafe mode refuses to run jobs as root: start the service as an unprivileged user")
        isolation, args = Isolation(), args[1:]
    elif args and args[0].startswith("--container="):
        if os.getpid() != 1:
            # The worker must be init: the one process of its container no job outlives.
            sys.exit("container mode needs the worker to be PID 1 of its container (no --init)")
        job_uid = int(args[0].partition("=")[2])
        if os.geteuid() != 0 or job_uid <= 0:
            sys.exit("container mode starts as root (CAP_SETUID, CAP_SETGID, CAP_SETPCAP, CAP_KILL only) "
                     "to run jobs as --container=UID")
        isolation, args = ContainerIsolation(job_uid), args[1:]
        _container_cleanup(job_uid)
    return isolation, [m for m in args[0].split(",") if m] if args else []


def _preload(modules: list[str]) -> None:
    for name in modules:
        module = importlib.import_module(name)
        # Lazy imports and caches filled here are inherited by every forked job.
        warm_up = getattr(module, "sandbox_warm_up", None)
        if callable(warm_up):
            warm_up()


def _take_protocol_pipes() -> tuple[int, int]:
    """Move the host pipes off 0 and 1, so nothing a job starts finds them there."""
    host_in, host_out = os.dup(STDIN_FD), os.dup(STDOUT_FD)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, STDIN_FD)
    os.dup2(devnull, STDOUT_FD)
    os.close(devnull)
    return host_in, host_out


def _supervise_in_fork(spec: dict, host_in: int, host_out: int, isolation: Isolation) -> int:
    pid = os.fork()
    if pid == 0:
        code = 1
        # A signal ends the supervisor as a signal, not as a KeyboardInterrupt.
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        try:
            JobSupervisor(spec, host_in, host_out, isolation).run()
            code = 0
        except BaseException:
            traceback.print_exc()
        os._exit(code)
    return pid


def main() -> None:
    isolation, preload = _parse_mode(sys.argv[1:])
    _libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    _preload(preload)
    host_in, host_out = _take_protocol_pipes()
    write_frame(host_out, {"t": "ready", "pid": os.getpid(), "uid": os.getuid()})
    while True:
        try:
            frame = read_frame(host_in)
        except (EOFError, ValueError):
            return  # the host closed the pipe, or it is out of step: the host replaces us
        if frame.get("t") != "job":
            continue  # e.g. an abort that crossed the previous job's `done`
        spec = frame["spec"]
        pid = _supervise_in_fork(spec, host_in, host_out, isolation)
        isolation.await_supervisor(pid, host_out, str(spec.get("nonce")))
        # A supervisor that died mid-job may have left them non-blocking (shared description).
        os.set_blocking(host_in, True)
        os.set_blocking(host_out, True)
        if not isolation.between_jobs(host_out):
            return


if __name__ == "__main__":
    main()

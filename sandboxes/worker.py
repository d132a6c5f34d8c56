"""Warm worker that runs *inside* a sandbox (standard library only).

The trusted host starts one of these per pool slot inside an outer namespace sandbox
(bubblewrap or a container). It pre-imports the pool's modules once, then for each job:

  worker (zygote) --fork--> supervisor --unshare(user, pid, mount, ipc)--fork--> job

The job process is PID 1 of a fresh PID namespace, with a fresh tmpfs scratch at /tmp,
its own /proc (so it sees no other process), rlimits, no capabilities and a cleared
environment. When it exits the kernel kills everything it started, so a fork bomb or a
`setsid` escapee cannot outlive the job. The supervisor is trusted: it relays framed
messages between the host and the job, caps output, enforces the wall clock and
reports usage. Only the supervisor speaks to the host; the job's frames are checked.

Container mode (`worker.py --container PRELOAD`, used by the docker backend): Docker's
default seccomp profile forbids `unshare`, so the per-job isolation is done without new
namespaces. The worker must be PID 1 of its container (init cannot be killed by its own
namespace). Each job gets a freshly made scratch directory; when the job ends the
supervisor kills every process except PID 1 and itself (`kill(-1)`), and the worker then
kills anything left, removes everything jobs can write (/tmp, /dev/shm, /dev/mqueue,
System V IPC objects) and reports `clean` before it takes the next job. rlimits are as
in the process mode; the container itself supplies no network, a read-only root,
no capabilities, no-new-privileges and a non-root uid.

Frames are a 4-byte big-endian length followed by UTF-8 JSON.
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
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

# Run as a script with -I: make the package importable from the mount root.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from sandboxes.frames import FrameError, read_frame, write_frame  # noqa: E402

JOB_MAX_FRAME = 16 * 1024 * 1024
SCRATCH = "/tmp/work"
# Unsafe mode (`worker.py --unsafe PRELOAD`): the operator's explicit choice where no
# namespaces can be made. Jobs get rlimits, a private scratch directory and their own
# process group, and nothing else: they can read what the service user can read.
UNSAFE = False
# Container mode: every place a job can write, wiped after each job.
CONTAINER_WRITABLE = ("/tmp", "/dev/shm", "/dev/mqueue")
CONTAINER_CLEANUP_S = 5.0
IPC_RMID = 0

CLONE_NEWNS = 0x00020000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_NOEXEC = 0x8
MS_REC = 0x4000
MS_PRIVATE = 1 << 18
PR_SET_DUMPABLE = 4

_libc = ctypes.CDLL(None, use_errno=True)


def _check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _mount(source: str, target: str, fstype: str, flags: int, data: str = "") -> None:
    _check(
        _libc.mount(source.encode(), target.encode(), fstype.encode(), flags, data.encode() or None),
        f"mount {target}",
    )


def _drop_capabilities() -> None:
    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]

    header = Header(0x20080522, 0)
    data = (Data * 2)()
    _check(_libc.capset(ctypes.byref(header), ctypes.byref(data)), "capset")


# --------------------------------------------------------------------------- job side


class Channel:
    """What a called function uses to talk to the trusted host during a job."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._next_id = 0

    def ask(self, body: object) -> object:
        """Send `body` to the host's message handler and return its answer."""
        self._next_id += 1
        ask_id = self._next_id
        write_frame(self._fd, {"t": "ask", "id": ask_id, "body": body})
        while True:
            frame = read_frame(self._fd)
            if frame.get("t") == "ans" and frame.get("id") == ask_id:
                return frame.get("body")

    def serve(self, handler) -> None:
        """Answer the host's requests with `handler(body)` until the host says finish."""
        while True:
            frame = read_frame(self._fd)
            kind = frame.get("t")
            if kind == "finish":
                return
            if kind == "req":
                write_frame(self._fd, {"t": "ans", "id": frame.get("id"), "body": handler(frame.get("body"))})


def _apply_limits(limits: dict) -> None:
    mem = int(limits["memory_mb"]) * 1024 * 1024
    # Soft == hard: the kernel then sends SIGKILL, which even a namespace's PID 1 gets.
    cpu = max(1, int(float(limits["cpu_s"]) + 0.999))
    fsize = int(limits["file_size_mb"]) * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
    resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
    resource.setrlimit(resource.RLIMIT_NOFILE, (int(limits["open_files"]),) * 2)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if os.getuid() != 0:
        # Counted per user: the host gives each worker its own uid when it can.
        nproc = int(limits["processes"]) + 4
        resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))


def _job_main(spec: dict, stdin_fd: int, out_fd: int, err_fd: int, chan_fd: int, container: bool = False) -> None:
    """Runs as PID 1 of the job's namespace (in container mode: in the container's). Never returns."""
    code = 70
    try:
        # Own session and process group: kill(0, ...) must not reach the supervisor.
        os.setsid()
        os.chdir(SCRATCH)
        os.dup2(stdin_fd, 0)
        os.dup2(out_fd, 1)
        os.dup2(err_fd, 2)
        os.dup2(chan_fd, 3)
        for fd in [int(name) for name in os.listdir("/proc/self/fd")]:
            if fd > 3:
                with contextlib.suppress(OSError):
                    os.close(fd)
        os.set_inheritable(3, spec["mode"] == "call")
        # A fresh procfs cannot be mounted under bwrap's partly read-only /proc, so the
        # job gets an empty /proc: it sees no process, and PID namespaces keep it from
        # addressing any process outside its own.
        if UNSAFE:
            pass  # no mount namespace: nothing can be hidden
        elif not container:  # container mode: no CAP_SYS_ADMIN, the job sees the container's /proc
            _mount("none", "/proc", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=16k,mode=0555")
        else:
            # If the container's memory limit is hit, the job and not its supervisor dies.
            with contextlib.suppress(OSError), open("/proc/self/oom_score_adj", "w") as f:
                f.write("1000")
            signal.signal(signal.SIGINT, signal.default_int_handler)

        # CPython ignores these; commands the job runs would inherit that.
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
        signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": SCRATCH, "LANG": "C.UTF-8", "TMPDIR": SCRATCH}
        env.update(spec.get("env") or {})
        os.environ.clear()
        os.environ.update(env)
        _apply_limits(spec["limits"])
        _drop_capabilities()
        if spec["mode"] == "exec":
            argv = spec["argv"]
            os.execvpe(argv[0], argv, env)
        sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115
        module_name, func_name = spec["target"].split(":")
        func = getattr(importlib.import_module(module_name), func_name)
        try:
            value = func(spec.get("payload"), Channel(3))
            frame = {"t": "result", "value": value}
        except BaseException as exc:  # the function's own failure is data for the host
            frame = {"t": "raised", "type": type(exc).__name__, "message": str(exc)[:2000]}
            traceback.print_exc()
        sys.stdout.flush()
        sys.stderr.flush()
        write_frame(3, frame)
        code = 0
    except BaseException:
        traceback.print_exc()
    finally:
        os._exit(code)


# ----------------------------------------------------------------------- supervisor


def _enter_job_namespace(scratch_mb: int) -> None:
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
    _mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, f"size={scratch_mb}m,mode=0755")
    os.mkdir(SCRATCH, 0o755)


def _write_files(files: dict) -> None:
    for name, b64 in files.items():
        path = os.path.normpath(os.path.join(SCRATCH, name))
        if not path.startswith(SCRATCH + "/"):
            raise ValueError(f"file name escapes the scratch directory: {name!r}")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(base64.b64decode(b64))


class _Capture:
    def __init__(self, fd: int, cap: int) -> None:
        self.fd, self.cap, self.data, self.truncated = fd, cap, bytearray(), False

    def pump(self) -> bool:
        """Read what is there; False at EOF or once over the cap."""
        chunk = os.read(self.fd, 65536)
        if not chunk:
            return False
        room = self.cap - len(self.data)
        self.data += chunk[: max(room, 0)]
        if len(chunk) > room:
            self.truncated = True
            return False
        return True


def _supervise(spec: dict, host_in: int, host_out: int, container: bool = False) -> None:
    """Runs in a fork of the worker. Owns the host pipes until it sends `done`."""
    limits = spec["limits"]
    if UNSAFE:
        global SCRATCH
        SCRATCH = tempfile.mkdtemp(prefix="assay-job-")
    elif container:
        # The worker wiped /tmp after the previous job; the directory is new.
        os.mkdir(SCRATCH, 0o755)
    else:
        _enter_job_namespace(int(limits.get("scratch_mb", 64)))
    _write_files(spec.get("files") or {})
    stdin_r, stdin_w = os.pipe()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    sup_sock, job_sock = socket.socketpair()
    started = time.monotonic()
    pid = os.fork()
    if pid == 0:
        for fd in (stdin_w, out_r, err_r, host_in, host_out):
            os.close(fd)
        sup_sock.close()
        _job_main(spec, stdin_r, out_w, err_w, job_sock.detach(), container)
    for fd in (stdin_r, out_w, err_w):
        os.close(fd)
    job_sock.close()
    stdin_data = base64.b64decode(spec.get("stdin") or "")
    if stdin_data:
        os.set_blocking(stdin_w, False)
    else:
        os.close(stdin_w)
    cap = int(limits["output_bytes"])
    outputs = {out_r: _Capture(out_r, cap), err_r: _Capture(err_r, cap)}
    pidfd = os.pidfd_open(pid)
    chan = sup_sock.fileno()
    deadline = started + float(limits["wall_s"])
    killed_by = None
    violations: list[str] = []
    outcome: dict = {}
    open_reads = {host_in, chan, out_r, err_r, pidfd}
    exited = False

    def kill(reason: str | None) -> None:
        nonlocal killed_by
        if killed_by is None:
            killed_by = reason
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)

    while not exited:
        now = time.monotonic()
        if now >= deadline:
            kill("timeout")
        writes = [stdin_w] if stdin_data else []
        readable, writable, _ = select.select(list(open_reads), writes, [], max(0.0, deadline - now) or 0.01)
        for fd in writable:
            try:
                stdin_data = stdin_data[os.write(fd, stdin_data[:65536]) :]
            except (BrokenPipeError, BlockingIOError):
                stdin_data = b""
            if not stdin_data:
                os.close(stdin_w)
        for fd in readable:
            if fd == pidfd:
                exited = True
                if container:
                    # What a PID namespace's end does in process mode: nothing the job
                    # started outlives it (kill(-1) spares only PID 1 and the caller).
                    _kill_all_but_init()
                elif UNSAFE:
                    # Only the job's process group: a `setsid` escapee survives (unsafe).
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.killpg(pid, signal.SIGKILL)
            elif fd in outputs:
                if not outputs[fd].pump():
                    open_reads.discard(fd)
                    if outputs[fd].truncated:
                        kill("output")
            elif fd == chan:
                try:
                    frame = read_frame(chan, JOB_MAX_FRAME)
                except (EOFError, ConnectionResetError):
                    open_reads.discard(chan)
                    continue
                except (FrameError, ValueError, RecursionError) as exc:
                    violations.append(f"bad frame from job: {exc}"[:200])
                    open_reads.discard(chan)
                    kill(None)
                    continue
                kind = frame.get("t") if isinstance(frame, dict) else None
                if kind in ("ask", "ans"):
                    write_frame(host_out, {"t": kind, "id": frame.get("id"), "body": frame.get("body")})
                elif kind in ("result", "raised") and not outcome:
                    outcome = frame
            elif fd == host_in:
                frame = read_frame(host_in)
                if frame.get("t") == "abort":
                    kill(None)
                    violations.append("aborted by host")
                elif chan in open_reads:
                    try:
                        write_frame(chan, frame)
                    except OSError:
                        open_reads.discard(chan)
    # Drain what the job wrote before it died.
    for fd, capture in outputs.items():
        if fd in open_reads:
            os.set_blocking(fd, False)
            try:
                while capture.pump():
                    pass
            except BlockingIOError:
                pass
    if chan in open_reads and not outcome:
        sup_sock.setblocking(False)
        try:
            frame = read_frame(chan, JOB_MAX_FRAME)
            if isinstance(frame, dict) and frame.get("t") in ("result", "raised"):
                outcome = frame
        except (EOFError, BlockingIOError, FrameError, ValueError, RecursionError, OSError):
            pass
    _, status, usage = os.wait4(pid, 0)
    wall = time.monotonic() - started
    exit_code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else None
    sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
    if killed_by is None and sig in (signal.SIGXCPU,):
        killed_by = "cpu"
    if killed_by is None and sig == signal.SIGKILL and usage.ru_utime + usage.ru_stime >= 0.9 * float(limits["cpu_s"]):
        killed_by = "cpu"
    if killed_by is None and sig == signal.SIGXFSZ:
        violations.append("file size limit exceeded")
    stderr = bytes(outputs[err_r].data)
    if killed_by is None and (outcome.get("type") == "MemoryError" or b"MemoryError" in stderr[-4000:]):
        killed_by = "memory"
    if UNSAFE:
        shutil.rmtree(SCRATCH, ignore_errors=True)
    write_frame(
        host_out,
        {
            "t": "done",
            "exit_code": exit_code,
            "signal": sig,
            "stdout": base64.b64encode(bytes(outputs[out_r].data)).decode(),
            "stderr": base64.b64encode(stderr).decode(),
            "stdout_truncated": outputs[out_r].truncated,
            "stderr_truncated": outputs[err_r].truncated,
            "wall_s": wall,
            "cpu_s": usage.ru_utime + usage.ru_stime,
            "peak_memory_mb": usage.ru_maxrss / 1024,
            "killed_by": killed_by,
            "violations": violations,
            "outcome": outcome,
        },
    )


# ------------------------------------------------------------------ container mode


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


def _wipe(top: str) -> None:
    """Remove everything under `top` (not `top` itself), whatever modes the job set."""
    if not os.path.isdir(top):
        return
    stack = [top]
    dirs: list[str] = []
    while stack:  # iterative: a job may nest directories deeper than the recursion limit
        path = stack.pop()
        for entry in os.scandir(path):
            if entry.is_dir(follow_symlinks=False):
                os.chmod(entry.path, 0o700)
                stack.append(entry.path)
                dirs.append(entry.path)
            else:
                os.unlink(entry.path)
    for path in reversed(dirs):
        os.rmdir(path)


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


def _await_supervisor_in_container(pid: int, host_out: int) -> None:
    """In a container the job shares the supervisor's uid, so it can signal it (in
    process mode it cannot even name it). A supervisor that was SIGKILLed or stopped
    while its job ran was attacked by the job: that is reported as the job's violation,
    not as an infrastructure failure. (The container is replaced after a violation.)"""
    _, status = os.waitpid(pid, os.WUNTRACED)
    # Nothing but the job signals the supervisor (the OOM killer is pointed at the job).
    tampered = os.WIFSTOPPED(status) or os.WIFSIGNALED(status)
    if os.WIFSTOPPED(status):
        _kill_all_but_init()
        os.waitpid(pid, 0)
    if tampered:
        write_frame(host_out, {"t": "done", "exit_code": None, "signal": None, "killed_by": None,
                               "violations": ["the job signalled its sandbox supervisor"], "outcome": {}})
    elif not (os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0):
        write_frame(host_out, {"t": "done", "infrastructure_error": f"supervisor failed with status {status}"})


def _container_cleanup() -> None:
    _reap_and_kill_rest(time.monotonic() + CONTAINER_CLEANUP_S)
    for top in CONTAINER_WRITABLE:
        _wipe(top)
    _remove_sysv_ipc()


def main() -> None:
    global UNSAFE
    args = sys.argv[1:]
    if args and args[0] == "--unsafe":
        if os.geteuid() == 0:
            sys.exit("unsafe mode refuses to run jobs as root: start the service as an unprivileged user")
        UNSAFE = True
        args = args[1:]
    container = bool(args) and args[0] == "--container"
    if container:
        args = args[1:]
        if os.getpid() != 1:
            # kill(-1) in container mode would take the worker down with the job.
            sys.exit("container mode needs the worker to be PID 1 of its container (no --init)")
        _container_cleanup()
    preload = [m for m in args[0].split(",") if m] if args else []
    _libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    for name in preload:
        module = importlib.import_module(name)
        # Lazy imports and caches filled here are inherited by every forked job.
        warm_up = getattr(module, "sandbox_warm_up", None)
        if callable(warm_up):
            warm_up()
    # Keep the protocol pipes away from anything a job could inherit by accident.
    host_in, host_out = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    write_frame(host_out, {"t": "ready", "pid": os.getpid(), "uid": os.getuid()})
    while True:
        try:
            frame = read_frame(host_in)
        except EOFError:
            return
        if frame.get("t") != "job":
            continue
        pid = os.fork()
        if pid == 0:
            code = 1
            if container:  # a signal ends the supervisor as a signal, not as a KeyboardInterrupt
                signal.signal(signal.SIGINT, signal.SIG_DFL)
            try:
                _supervise(frame["spec"], host_in, host_out, container)
                code = 0
            except BaseException:
                traceback.print_exc()
            os._exit(code)
        if container:
            _await_supervisor_in_container(pid, host_out)
        else:
            _, status = os.waitpid(pid, 0)
            if not (os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0):
                write_frame(host_out, {"t": "done", "infrastructure_error": f"supervisor failed with status {status}"})
        if container:
            # The host waits for this before it releases the container for the next job;
            # a failed cleanup ends the worker so that the host replaces the container.
            try:
                _container_cleanup()
            except Exception as exc:
                traceback.print_exc()
                write_frame(host_out, {"t": "clean", "ok": False, "error": repr(exc)[:500]})
                return
            write_frame(host_out, {"t": "clean", "ok": True})


if __name__ == "__main__":
    main()

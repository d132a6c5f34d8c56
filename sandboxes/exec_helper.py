"""The exec helper: a tiny static program that sets rlimits on itself and execs a program.

    assay-exec RESOURCE SOFT HARD [RESOURCE SOFT HARD ...] -- PATH ARGV0 [ARG ...]

RESOURCE is the kernel's number of the limit (Python's `resource.RLIMIT_*`), SOFT and HARD
decimal (2**64 - 1: no limit); it exits 127, as a failed exec does, when a limit is refused or
the program cannot run. Code in a sandbox job starts programs under limits tighter than its own
without a fork of its own Python (verifiers/code/inside/native.py `spawn`): a posix_spawn (vfork)
of a program that sets the limits and execs. util-linux's `prlimit` does that too, but,
dynamically linked, its start costs about as much CPU again as a small C program's whole run
(0.7-0.8 ms per start on this project's machine: docs/benchmarks.md); this one has no C library
and no dynamic loader, so its start is a bare exec (under 0.1 ms).

Built here, on the host, once per process, with the system's gcc (the same compiler the
sandbox's jobs use on the process backend), from the source below, and checked; the process
backend binds it read-only into every sandbox at `SANDBOX_PATH` (no job can change it). Where
there is no gcc, the architecture is neither x86-64 nor arm64, or the build or the check fails,
there is no helper and jobs use prlimit as before. Containers do not need it: their scratch is
`noexec`, so programs there start from a memfd, by a fork.
"""

from __future__ import annotations

import atexit
import logging
import os
import platform
import resource
import shutil
import subprocess
import tempfile
import threading

log = logging.getLogger(__name__)

# Where a process-backend sandbox finds it (verifiers/code/inside/native.py names the same path).
SANDBOX_PATH = "/opt/assay/libexec/assay-exec"
GCC = "/usr/bin/gcc"
PREFIX = "assay-exec-"  # then the builder's pid: tempfile.gettempdir()/assay-exec-<pid>-<random>
BUILD_TIMEOUT_S = 60
CHECK_TIMEOUT_S = 10
# No C library, no start files: a static executable with nothing to load or relocate.
FLAGS = ("-O2", "-ffreestanding", "-nostdlib", "-static", "-fno-stack-protector", "-fno-asynchronous-unwind-tables",
         "-Wl,--build-id=none", "-s")
ARCHITECTURES = frozenset({"x86_64", "amd64", "aarch64", "arm64"})
BUILD_ENV = {"PATH": "/usr/bin:/bin", "LANG": "C"}

SOURCE = r"""
typedef unsigned long u64;
#if defined(__x86_64__)
#define NR_PRLIMIT64 302
#define NR_EXECVE 59
#define NR_EXIT 60
static long sys4(long n, long a, long b, long c, long d) {
    long ret;
    register long r10 __asm__("r10") = d;
    __asm__ volatile("syscall" : "=a"(ret) : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10) : "rcx", "r11", "memory");
    return ret;
}
__asm__(".globl _start\n_start:\n mov %rsp, %rdi\n and $-16, %rsp\n call start\n hlt\n");
#elif defined(__aarch64__)
#define NR_PRLIMIT64 261
#define NR_EXECVE 221
#define NR_EXIT 93
static long sys4(long n, long a, long b, long c, long d) {
    register long x8 __asm__("x8") = n;
    register long x0 __asm__("x0") = a;
    register long x1 __asm__("x1") = b;
    register long x2 __asm__("x2") = c;
    register long x3 __asm__("x3") = d;
    __asm__ volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2), "r"(x3) : "memory");
    return x0;
}
__asm__(".globl _start\n_start:\n mov x0, sp\n bl start\n");
#else
#error "no exec helper for this architecture"
#endif

static void fail(void) {
    for (;;) sys4(NR_EXIT, 127, 0, 0, 0);
}

static u64 number(const char *s) {
    u64 v = 0;
    if (!*s) fail();
    for (; *s; s++) {
        if (*s < '0' || *s > '9') fail();
        v = v * 10 + (u64)(*s - '0');
    }
    return v;
}

static int separator(const char *s) { return s[0] == '-' && s[1] == '-' && !s[2]; }

void start(long *sp) {
    long argc = sp[0], i = 1;
    char **argv = (char **)(sp + 1);
    char **envp = argv + argc + 1;
    while (i < argc && !separator(argv[i])) {
        if (i + 2 >= argc) fail();
        u64 limit[2] = {number(argv[i + 1]), number(argv[i + 2])};
        if (sys4(NR_PRLIMIT64, 0, (long)number(argv[i]), (long)limit, 0) != 0) fail();
        i += 3;
    }
    if (i + 2 >= argc) fail();
    sys4(NR_EXECVE, (long)argv[i + 1], (long)(argv + i + 2), (long)envp, 0);
    fail();
}
"""

_lock = threading.Lock()
_built: list[str | None] = []  # [path or None] once tried


def helper_path() -> str | None:
    """The helper on this host (built on the first call), or None where there is none."""
    with _lock:
        if not _built:
            _built.append(_build())
        return _built[0]


def _build() -> str | None:
    if platform.machine().lower() not in ARCHITECTURES or not os.access(GCC, os.X_OK):
        return None
    _remove_orphans()
    work = tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-")
    atexit.register(_remove, work, os.getpid())
    source, binary = os.path.join(work, "assay-exec.c"), os.path.join(work, "assay-exec")
    try:
        with open(source, "w") as f:
            f.write(SOURCE)
        built = subprocess.run([GCC, *FLAGS, "-o", binary, source], capture_output=True, stdin=subprocess.DEVNULL,
                               timeout=BUILD_TIMEOUT_S, cwd=work, env=BUILD_ENV)
        if built.returncode != 0:
            log.warning("could not build the sandbox exec helper (prlimit starts programs instead): %s",
                        built.stderr.decode(errors="replace")[-500:])
            return None
        os.chmod(binary, 0o555)
    except (OSError, subprocess.SubprocessError) as exc:
        log.warning("could not build the sandbox exec helper (prlimit starts programs instead): %s", exc)
        return None
    if not _works(binary):
        log.warning("the sandbox exec helper failed its check; prlimit starts programs instead")
        return None
    return binary


def _remove_orphans() -> None:
    """Helpers left by processes that died without their exit handler (a SIGKILL): this user's
    directories whose builder's pid no longer runs."""
    tmp = tempfile.gettempdir()
    for name in os.listdir(tmp):
        pid = name.removeprefix(PREFIX).split("-", 1)[0]
        if not name.startswith(PREFIX) or not pid.isdigit() or _running(int(pid)):
            continue
        path = os.path.join(tmp, name)
        try:
            if os.lstat(path).st_uid == os.getuid() and os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
        except OSError:
            continue


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _remove(work: str, builder: int) -> None:
    """At exit, by the process that built it only (a forked child's exit must not take it away)."""
    if os.getpid() == builder:
        shutil.rmtree(work, ignore_errors=True)


def _works(binary: str) -> bool:
    """It sets a limit, then execs the program with its own argv[0], arguments and environment."""
    probe = [binary, str(resource.RLIMIT_NOFILE), "17", "17", "--", "/bin/sh", "probe", "-c",
             'echo "$(ulimit -n) $0 $ASSAY_EXEC_CHECK"']
    try:
        done = subprocess.run(probe, capture_output=True, stdin=subprocess.DEVNULL, timeout=CHECK_TIMEOUT_S,
                              env={**BUILD_ENV, "ASSAY_EXEC_CHECK": "env"})
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0 and done.stdout == b"17 probe env\n"

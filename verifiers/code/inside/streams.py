"""A program's standard streams, which it may also open by path (standard library only).

Contest code often reads `/dev/stdin` (`fs.readFileSync('/dev/stdin')` in JavaScript,
`ifstream("/dev/stdin")`, `open('/dev/stdin')`) or writes `/dev/stdout` instead of using
fds 0 and 1. Those paths lead through /proc/self/fd:

- where the job's /proc is the kernel's (docker), its links reach any descriptor, so a
  memfd for stdin and pipes for the outputs serve;
- a process-backend job has a /proc of its own whose `self/fd` is a link to a directory
  of the job's scratch (sandboxes/inside/worker.py JOB_FD_DIR). There each stream is also
  made at its number: stdin a file `0`, stdout and stderr FIFOs `1` and `2`, and the
  program's descriptors are those very objects, so writes by fd and by path arrive in
  order. A stdin the job may not write as a file (over its file-size limit, or past its
  scratch) falls back to a memfd: fd 0 still serves, the path does not.

What is made there is the case's own input and outputs, nothing another case could read:
the code runner wipes the scratch after every case (inside/cases.py).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import resource

STDIN, STDOUT, STDERR = 0, 1, 2
# An output pipe's buffer: Node drops what it still had queued for a full pipe when a
# program calls process.exit() (`process.stdout.write(all); process.exit(0)` is common),
# so a pipe that takes this much at once keeps such output whole. 1 MiB is what an
# unprivileged process may ask for (/proc/sys/fs/pipe-max-size's default).
PIPE_BYTES = 1 << 20


def stdin_descriptor(data: bytes) -> int:
    """A descriptor for fd 0 holding `data`, at its start, for a program whose outputs are
    the job's own: by path too where the job's /proc/self/fd is a link."""
    folder = _new_fd_directory()
    fd = _stdin_file(folder, data) if folder is not None else None
    return fd if fd is not None else _memfd(data)


def case_streams(data: bytes) -> tuple[int, tuple[int, int], tuple[int, int]]:
    """A program's three streams for one run: (stdin, (stdout read, stdout write),
    (stderr read, stderr write)); the read ends are non-blocking."""
    folder = _new_fd_directory()
    stdin = _stdin_file(folder, data) if folder is not None else None
    if stdin is None:
        stdin = _memfd(data)
    outputs = [_fifo(folder, number) if folder is not None else os.pipe() for number in (STDOUT, STDERR)]
    for read_end, write_end in outputs:
        os.set_blocking(read_end, False)
        with contextlib.suppress(OSError):  # over the user's share of pipe memory: the default size
            fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
    return stdin, outputs[0], outputs[1]


def _new_fd_directory() -> str | None:
    """The directory the job's /proc/self/fd leads to, made now, where the sandbox made that
    a link. None where it is the kernel's (a directory, not a link), or where something is
    at that path already: the runner wipes the scratch after each case and a program's run
    is otherwise a job of its own, so that is a program's doing, and it is left alone."""
    try:
        folder = os.readlink("/proc/self/fd")
        os.mkdir(folder, 0o700)
    except OSError:
        return None
    return folder


def _memfd(data: bytes) -> int:
    fd = os.memfd_create("stdin")
    write_all(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _stdin_file(folder: str, data: bytes) -> int | None:
    path = os.path.join(folder, str(STDIN))
    soft, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
    if soft != resource.RLIM_INFINITY and len(data) > soft:
        return None  # writing it would be SIGXFSZ
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        write_all(fd, data)
    except OSError:  # the scratch is full
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(path)
        return None
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _fifo(folder: str, number: int) -> tuple[int, int]:
    path = os.path.join(folder, str(number))
    os.mkfifo(path, 0o600)
    # The read end first, without waiting for a writer; then the write end finds a reader.
    read_end = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    return read_end, os.open(path, os.O_WRONLY)


def write_all(fd: int, data: bytes) -> None:
    """All of `data` to `fd` (os.write may take part of it)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]

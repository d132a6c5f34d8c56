"""Starts a compiled program as a stream job (interactive problems): run inside the sandbox.

    python3 -I -S launch.py EXECUTABLE STACK_KB ARGV...

The job's stdin and stdout are the crossed pipes to the other side, so this process only
sets the stack as a judge does (as deep as the memory allows) and becomes the program:
when EXECUTABLE names a file, a copy of it in a memfd is executed (the sandbox wrote the
file, and a container's scratch is `noexec`); otherwise ARGV[0] is. Standard library only.
"""

from __future__ import annotations

import contextlib
import os
import resource
import sys


def main(args: list[str]) -> None:
    executable, stack_kb, argv = args[0], int(args[1]), args[2:]
    _, hard = resource.getrlimit(resource.RLIMIT_STACK)
    size = stack_kb * 1024 if hard == resource.RLIM_INFINITY else min(stack_kb * 1024, hard)
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_STACK, (size, hard))
    if not executable:
        os.execve(argv[0], argv, dict(os.environ))
    fd = os.memfd_create(executable, 0)
    with open(executable, "rb") as source:
        while chunk := source.read(1 << 20):
            os.write(fd, chunk)
    os.execve(fd, argv, dict(os.environ))


if __name__ == "__main__":
    main(sys.argv[1:])

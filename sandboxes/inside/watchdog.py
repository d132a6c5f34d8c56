"""A per-item watchdog for trusted code that runs *inside* a sandboxed call (standard
library only).

Some work cannot be interrupted from within: a single SQLite step inside one function
call, a regular expression, any C routine that holds the interpreter. A sandboxed call
that judges many items (a group's responses, a batch of statements) in one process would
then make every item wait for the slowest, and a kill of the whole call would leave no
result for any. `run_watched` runs the items in turn in a forked process; the parent
kills that process once an item runs past its own limit, records `on_timeout(item)` for
it, and goes on with the items after it in a fresh process. One item costs at most its
own limit (plus a process start), whatever it does, and never ends the call.

The worker process never wakes the parent while it works (on a loaded machine every
wake-up costs a scheduling delay): it writes which item runs, and since when, into a
small shared memory block, and appends each result to an unlinked spool file as a
length-prefixed JSON frame. The parent sleeps until the running item's deadline, the
worker's exit (the end of a pipe only the worker holds) or its next look (`POLL_S`),
then reads the spool.
"""

from __future__ import annotations

import contextlib
import json
import mmap
import os
import select
import signal
import struct
import tempfile
import time
from collections.abc import Callable
from typing import Any

# How long the worker process may take to start, or to begin its next item.
START_S = 10.0
# How often the parent looks at which item runs (an overrun is seen this much late at most).
POLL_S = 0.05
_HEADER = struct.Struct(">I")
# Shared block: the index (in this round's items) of the running item, -1 before the
# first, and the CLOCK_MONOTONIC nanoseconds at which it started.
_RUNNING = struct.Struct("=qq")


def _worker(items: list[int], work: Callable[[int], Any], board: mmap.mmap, spool: int) -> None:
    for position, item in enumerate(items):
        _RUNNING.pack_into(board, 0, position, time.monotonic_ns())
        data = json.dumps(work(item), separators=(",", ":")).encode()
        os.write(spool, _HEADER.pack(len(data)) + data)


def _read_spool(spool: int) -> list[Any]:
    """Every whole frame in the spool (a frame cut short by a kill is dropped)."""
    os.lseek(spool, 0, os.SEEK_SET)
    chunks = []
    while chunk := os.read(spool, 1 << 20):
        chunks.append(chunk)
    data = b"".join(chunks)
    out, at = [], 0
    while at + _HEADER.size <= len(data):
        size = _HEADER.unpack_from(data, at)[0]
        if at + _HEADER.size + size > len(data):
            break
        out.append(json.loads(data[at + _HEADER.size:at + _HEADER.size + size]))
        at += _HEADER.size + size
    return out


def run_watched(
    items: list[int],
    work: Callable[[int], Any],
    limit_s: Callable[[int], float],
    on_timeout: Callable[[int], Any],
    on_death: Callable[[int, int], Any],
    skip: Callable[[int, dict[int, Any]], Any] | None = None,
) -> dict[int, Any]:
    """{item: result} for every item: `work(item)` (JSON data, computed in a forked
    process), `on_timeout(item)` when it ran past `limit_s(item)`, or
    `on_death(item, wait_status)` when the process died while it ran. Before each fresh
    process, `skip(item, results so far)` may settle an item without running it (not
    None: its result)."""
    results: dict[int, Any] = {}
    board = mmap.mmap(-1, _RUNNING.size)
    try:
        while True:
            if skip is not None:
                for item in items:
                    if item not in results and (settled := skip(item, results)) is not None:
                        results[item] = settled
            todo = [item for item in items if item not in results]
            if not todo:
                return results
            _RUNNING.pack_into(board, 0, -1, time.monotonic_ns())
            with tempfile.TemporaryFile() as spool_file:
                spool = spool_file.fileno()
                done, status, stuck = _one_round(todo, work, limit_s, board, spool)
                finished = _read_spool(spool)
            for position, result in enumerate(finished):
                results[todo[position]] = result
            if stuck is not None and stuck < len(todo) and todo[stuck] not in results:
                item = todo[stuck]
                results[item] = on_death(item, status) if done else on_timeout(item)
    finally:
        board.close()


def _one_round(todo: list[int], work: Callable[[int], Any], limit_s: Callable[[int], float],
               board: mmap.mmap, spool: int) -> tuple[bool, int, int | None]:
    """Run `todo` in one worker process until it ends or overruns. Returns (whether it
    ended by itself, its wait status, the position of the item it was on or None)."""
    exit_r, exit_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the worker process
        code = 0
        try:
            os.close(exit_r)
            _worker(todo, work, board, spool)
        except BaseException:
            code = 1
        finally:
            os._exit(code)
    os.close(exit_w)
    ended = False
    try:
        while True:
            position, started_ns = _RUNNING.unpack_from(board, 0)
            limit = START_S if position < 0 else limit_s(todo[position])
            remaining = started_ns / 1e9 + limit - time.monotonic()
            if remaining <= 0:
                # Read again: the worker may have moved on while we looked.
                if _RUNNING.unpack_from(board, 0) == (position, started_ns):
                    break
                continue
            if select.select([exit_r], [], [], min(remaining, POLL_S))[0]:
                ended = True
                break
    finally:
        os.close(exit_r)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
    position = _RUNNING.unpack_from(board, 0)[0]
    # Ended by itself after its last item: nothing was stuck. Otherwise the item it was
    # on (or, if it never began one, the first) is to blame.
    return ended, status, max(position, 0) if not (ended and os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0) \
        else None

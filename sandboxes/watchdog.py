"""A per-item watchdog for trusted code that runs *inside* a sandboxed call (standard
library only).

Some work cannot be interrupted from within: a single SQLite step inside one function
call, a regular expression, any C routine that holds the interpreter. A sandboxed call
that judges many items (a group's responses, a batch of statements) in one process would
then make every item wait for the slowest, and a kill of the whole call would leave no
result for any. `run_watched` runs the items in turn in a forked process that announces
each item before it starts and sends its result after it ends; the parent kills that
process once an item runs past its own limit, records `on_timeout(item)` for it, and goes
on with the items after it in a fresh process. One item costs at most its own limit (plus
a process start), whatever it does, and never ends the call.

Frames between the two processes are a 4-byte big-endian length and UTF-8 JSON.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import struct
import time
from collections.abc import Callable
from typing import Any

# How long the worker process may take to start, or to begin its next item.
START_S = 10.0
_HEADER = struct.Struct(">I")


def _send(fd: int, frame: dict[str, Any]) -> None:
    data = _frame(frame)
    while data:
        data = data[os.write(fd, data):]


class _Frames:
    """Frames from the other process, read without blocking past a deadline."""

    def __init__(self, fd: int) -> None:
        self.fd, self.buffer, self.eof = fd, bytearray(), False

    def parse(self) -> dict[str, Any] | None:
        """A whole frame from what was read already, else None."""
        if len(self.buffer) >= _HEADER.size:
            size = _HEADER.unpack(self.buffer[:_HEADER.size])[0]
            if len(self.buffer) >= _HEADER.size + size:
                frame = json.loads(bytes(self.buffer[_HEADER.size:_HEADER.size + size]))
                del self.buffer[:_HEADER.size + size]
                return frame
        return None

    def fill(self) -> None:
        chunk = os.read(self.fd, 1 << 16)
        if not chunk:
            self.eof = True
        self.buffer += chunk

    def next(self, until: float | None) -> dict[str, Any] | None:
        """The next frame; None at EOF or once `until` (monotonic; None: never) has passed."""
        while (frame := self.parse()) is None:
            if self.eof:
                return None
            remaining = None if until is None else until - time.monotonic()
            if remaining is not None and (remaining <= 0 or not select.select([self.fd], [], [], remaining)[0]):
                return None
            self.fill()
        return frame


def _worker(items: list[int], work: Callable[[int], Any], out: int) -> None:
    for item in items:
        _send(out, {"start": item})
        _send(out, {"done": item, "result": work(item)})


def run_watched(
    items: list[int],
    work: Callable[[int], Any],
    limit_s: Callable[[int], float],
    on_timeout: Callable[[int], Any],
    on_death: Callable[[int, int], Any],
) -> dict[int, Any]:
    """{item: result} for every item: `work(item)` (JSON data, computed in a forked
    process), `on_timeout(item)` when it ran past `limit_s(item)`, or
    `on_death(item, wait_status)` when the process died while it ran."""
    results: dict[int, Any] = {}
    while todo := [item for item in items if item not in results]:
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:  # the worker process
            code = 0
            try:
                os.close(read_end)
                _worker(todo, work, write_end)
            except BaseException:
                code = 1
            finally:
                os._exit(code)
        os.close(write_end)
        frames = _Frames(read_end)
        running: int | None = None
        until = time.monotonic() + START_S
        progressed = False
        try:
            while (frame := frames.next(until)) is not None:
                if "start" in frame:
                    running = int(frame["start"])
                    until = time.monotonic() + limit_s(running)
                else:
                    results[int(frame["done"])] = frame["result"]
                    running, progressed = None, True
                    until = time.monotonic() + START_S
        finally:
            os.close(read_end)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            _, status = os.waitpid(pid, 0)
        # Blame the item that was running, or (no progress at all) the first one, so
        # that every round settles at least one item.
        stuck = running if running is not None else (None if progressed else todo[0])
        if stuck is not None and stuck not in results:
            results[stuck] = on_death(stuck, status) if frames.eof else on_timeout(stuck)
    return results


def _frame(obj: Any) -> bytes:
    data = json.dumps(obj, separators=(",", ":")).encode()
    return _HEADER.pack(len(data)) + data

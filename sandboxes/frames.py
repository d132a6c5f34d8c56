"""Length-prefixed JSON frames: the wire format between the host and sandbox workers.

Standard library only: this module also runs inside sandboxes and containers.
"""

from __future__ import annotations

import base64
import json
import os
import struct
from typing import Any

MAX_FRAME = 64 * 1024 * 1024


class FrameError(ValueError):
    pass


def read_exact(fd: int, n: int) -> bytes:
    chunks = []
    while n:
        chunk = os.read(fd, min(n, 1 << 20))
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def read_frame(fd: int, limit: int = MAX_FRAME) -> Any:
    (size,) = struct.unpack(">I", read_exact(fd, 4))
    if size > limit:
        raise FrameError(f"frame of {size} bytes exceeds {limit}")
    return json.loads(read_exact(fd, size))


def write_frame(fd: int, obj: Any) -> None:
    data = json.dumps(obj, separators=(",", ":")).encode()
    buf = struct.pack(">I", len(data)) + data
    while buf:
        buf = buf[os.write(fd, buf) :]


def decode_done(frame: dict[str, Any], backend: str):
    """Turn a worker's `done` frame into a CallResult."""
    from sandboxes.base import CallResult

    outcome = frame.get("outcome") or {}
    return CallResult(
        exit_code=frame.get("exit_code"),
        signal=frame.get("signal"),
        stdout=base64.b64decode(frame.get("stdout") or ""),
        stderr=base64.b64decode(frame.get("stderr") or ""),
        stdout_truncated=bool(frame.get("stdout_truncated")),
        stderr_truncated=bool(frame.get("stderr_truncated")),
        wall_s=float(frame.get("wall_s") or 0.0),
        cpu_s=float(frame.get("cpu_s") or 0.0),
        peak_memory_mb=float(frame.get("peak_memory_mb") or 0.0),
        killed_by=frame.get("killed_by"),
        violations=list(frame.get("violations") or []),
        backend=backend,
        value=outcome.get("value"),
        returned=outcome.get("t") == "result",
        raised={"type": str(outcome.get("type")), "message": str(outcome.get("message"))}
        if outcome.get("t") == "raised"
        else None,
    )

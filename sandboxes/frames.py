"""Length-prefixed JSON frames: the wire format between the host and sandbox workers.

A frame is a 4-byte big-endian length followed by UTF-8 JSON. Blocking helpers serve
the trusted ends that own their pipe (the idle worker, a job's own channel); the
incremental `FrameReader` and `FrameWriter` serve every end that must keep a clock
running while the other side may be hostile: they never block, never trust a length
before checking it, and turn anything malformed into a `FrameError`.

Standard library only: this module also runs inside sandboxes and containers.
"""

from __future__ import annotations

import base64
import json
import os
import struct
from typing import Any

MAX_FRAME = 64 * 1024 * 1024
HEADER = struct.Struct(">I")
READ_CHUNK = 1 << 16


class FrameError(ValueError):
    """Bytes on a channel that are not a well-formed frame."""


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
    (size,) = HEADER.unpack(read_exact(fd, HEADER.size))
    if size > limit:
        raise FrameError(f"frame of {size} bytes exceeds {limit}")
    return json.loads(read_exact(fd, size))


def encode_frame(obj: Any) -> bytes:
    data = json.dumps(obj, separators=(",", ":")).encode()
    return HEADER.pack(len(data)) + data


def write_frame(fd: int, obj: Any) -> None:
    buf = encode_frame(obj)
    while buf:
        buf = buf[os.write(fd, buf) :]


class FrameReader:
    """Reassembles frames from a non-blocking descriptor, a chunk at a time."""

    def __init__(self, fd: int, limit: int = MAX_FRAME) -> None:
        self.fd = fd
        self.limit = limit
        self.eof = False
        self._buf = bytearray()

    def fill(self) -> None:
        """Read what is there now (call when select() says readable)."""
        try:
            chunk = os.read(self.fd, READ_CHUNK)
        except BlockingIOError:
            return
        except ConnectionResetError:
            chunk = b""
        if not chunk:
            self.eof = True
        self._buf += chunk

    def next(self) -> dict[str, Any] | None:
        """The next complete frame, or None until one has arrived."""
        if len(self._buf) < HEADER.size:
            return None
        (size,) = HEADER.unpack_from(self._buf)
        if size > self.limit:
            raise FrameError(f"frame of {size} bytes exceeds {self.limit}")
        if len(self._buf) < HEADER.size + size:
            return None
        data = bytes(self._buf[HEADER.size : HEADER.size + size])
        del self._buf[: HEADER.size + size]
        try:
            frame = json.loads(data)
        except (ValueError, RecursionError) as exc:
            raise FrameError(f"undecodable frame: {type(exc).__name__}") from None
        if not isinstance(frame, dict):
            raise FrameError("a frame must be a JSON object")
        return frame

    def at_boundary(self) -> bool:
        """True when no partial frame is buffered."""
        return not self._buf


class FrameWriter:
    """Queues frames for a non-blocking descriptor and writes as much as it takes."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._pending = bytearray()

    def queue(self, obj: Any) -> None:
        self._pending += encode_frame(obj)

    @property
    def pending(self) -> int:
        return len(self._pending)

    def flush(self) -> None:
        """Write what the descriptor accepts now; OSError when the reader has gone."""
        while self._pending:
            try:
                written = os.write(self.fd, self._pending[:READ_CHUNK])
            except BlockingIOError:
                return
            del self._pending[:written]


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

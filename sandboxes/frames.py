"""Length-prefixed JSON frames: the wire format between the host and sandbox workers.

A frame is a 4-byte big-endian length followed by UTF-8 JSON. Blocking helpers serve
the trusted ends that own their pipe (the idle worker, a job's own channel); the
incremental `FrameReader` and `FrameWriter` serve every end that must keep a clock
running while the other side may be hostile: they never block, never trust a length
before checking it, and turn anything malformed into a `FrameError`.

Every frame is bounded both ways, in size and in nesting. A sender encodes first and
checks the encoded size (never the size of what it was handed: re-escaping can grow a
string six-fold) and the nesting against the receiver's limits before a byte goes out,
so a frame a receiver would refuse is never sent; a receiver checks both again.

Standard library only: this module also runs inside sandboxes and containers.
"""

from __future__ import annotations

import json
import os
import struct
from typing import Any

# Size limits, by hop. A job's own frames to its supervisor are at most JOB_MAX_FRAME;
# the supervisor re-encodes what it relays (escaping can grow it) and refuses anything
# over RELAY_MAX_FRAME; every other frame is at most MAX_FRAME, except a job's `done`,
# which also carries its captured output (`done_frame_limit`).
MAX_FRAME = 64 * 1024 * 1024
JOB_MAX_FRAME = 16 * 1024 * 1024
RELAY_MAX_FRAME = 32 * 1024 * 1024
DONE_SLACK = 64 * 1024
# The deepest nesting of JSON arrays and objects any frame may hold. Values that cross
# the channel are nested far less (verifiers/code/values.py: MAX_DEPTH JSON levels) plus
# a few levels of envelope; json's C code recurses per level, so this also keeps every
# encoder and decoder far from the interpreter's recursion limit.
MAX_DEPTH = 256
HEADER = struct.Struct(">I")
READ_CHUNK = 1 << 16
_OPENERS = (b"[", b"{")
KILL_REASONS = ("timeout", "cpu", "memory", "output")
# A job that waited for a CPU other jobs held gets up to this much of its wall clock back
# (the supervisor, sandboxes/inside/worker.py); the host waits for it that much longer.
CPU_WAIT_CREDIT_MAX_S = 2.0
VIOLATION_CHARS = 200
MAX_VIOLATIONS = 16


class FrameError(ValueError):
    """Bytes on a channel that are not a well-formed frame."""


def done_frame_limit(output_bytes: int) -> int:
    """The most a supervisor's `done` frame can hold: a relayed outcome plus stdout and
    stderr (each capped at `output_bytes`) in base64."""
    return RELAY_MAX_FRAME + 2 * (4 * (int(output_bytes) + 2) // 3) + DONE_SLACK


def read_exact(fd: int, n: int) -> bytes:
    chunks = []
    while n:
        chunk = os.read(fd, min(n, 1 << 20))
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def _too_deep(data: bytes, value: Any) -> bool:
    """Whether `value` (decoded from, or encoded to, `data`) nests deeper than MAX_DEPTH.
    A frame with fewer brackets than that cannot; otherwise walk it, without recursion."""
    if sum(data.count(opener) for opener in _OPENERS) <= MAX_DEPTH:
        return False
    level = [value]
    for _ in range(MAX_DEPTH):
        below = []
        for item in level:
            children = item.values() if type(item) is dict else item
            below += [c for c in children if type(c) is list or type(c) is dict]
        if not below:
            return False
        level = below
    return True


def decode_frame(data: bytes) -> Any:
    """The JSON value of one frame's body; FrameError if malformed or nested too deeply."""
    try:
        value = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise FrameError(f"undecodable frame: {type(exc).__name__}") from None
    if _too_deep(data, value):
        raise FrameError(f"frame nested deeper than {MAX_DEPTH}")
    return value


def read_frame(fd: int, limit: int = MAX_FRAME) -> Any:
    (size,) = HEADER.unpack(read_exact(fd, HEADER.size))
    if size > limit:
        raise FrameError(f"frame of {size} bytes exceeds {limit}")
    return decode_frame(read_exact(fd, size))


def encode_frame(obj: Any, limit: int = MAX_FRAME) -> bytes:
    """Header + body, or FrameError when the *encoded* body is over `limit`, nested too
    deeply, or not JSON data at all. Nothing is sent before this has passed."""
    try:
        data = json.dumps(obj, separators=(",", ":")).encode()
    except (TypeError, ValueError, RecursionError) as exc:
        raise FrameError(f"unencodable frame: {type(exc).__name__}") from None
    if len(data) > limit:
        raise FrameError(f"frame of {len(data)} bytes exceeds {limit}")
    if _too_deep(data, obj):
        raise FrameError(f"frame nested deeper than {MAX_DEPTH}")
    return HEADER.pack(len(data)) + data


def write_frame(fd: int, obj: Any, limit: int = MAX_FRAME) -> None:
    buf = encode_frame(obj, limit)
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
        frame = decode_frame(data)
        if not isinstance(frame, dict):
            raise FrameError("a frame must be a JSON object")
        return frame

    def at_boundary(self) -> bool:
        """True when no partial frame is buffered."""
        return not self._buf


class FrameWriter:
    """Queues frames for a non-blocking descriptor and writes as much as it takes."""

    def __init__(self, fd: int, limit: int = MAX_FRAME) -> None:
        self.fd = fd
        self.limit = limit
        self._pending = bytearray()

    def queue(self, obj: Any) -> None:
        """FrameError, and nothing queued, when the frame is over the receiver's limits."""
        self._pending += encode_frame(obj, self.limit)

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

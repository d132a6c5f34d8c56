"""The `remote` backend: this process asks a sandbox runner (`sandboxd`) for every job.

In the deployed stack the API holds no Docker socket. A separate small process,
`sandboxd` (`sandboxes/sandboxd.py`), is the only holder of the socket; the API reaches it
over an internal network or a unix socket and may ask for exactly what verifiers need:
run a command with limits, call a trusted function (with messages relayed through the
caller), open a call session (which is also what resident servers are), warm a pool,
read pool statistics. Nothing in the wire format can name an image, a mount, a
capability, a network or a runtime: those are fixed by the runner's own configuration.

Each operation is one connection. Both ends prove they hold the per-deployment secret
(HMAC-SHA256 over both sides' fresh challenges), so neither a stranger on the network
can use the runner nor a stranger posing as the runner can hand the API forged results.
The secret never crosses the wire. The stream is not encrypted: keep it on an internal
network or a unix socket (docs/security.md).

Failures keep the base interface's meaning: a runner that cannot be reached or refuses
is `SandboxUnavailable` (the API answers 503 before any work), a busy runner is
`SandboxBusy`, a runner lost in the middle of a job is a `SandboxError` (verdict `error`),
and a job's own outcome (timeout, violation, a call that ended) comes back as it was.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import socket
import threading
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from sandboxes.base import (
    CallEnded,
    CallResult,
    CallSession,
    Job,
    JobResult,
    Limits,
    MessageHandler,
    RequestTimeout,
    Sandbox,
    SandboxBusy,
    SandboxError,
    SandboxUnavailable,
)
from sandboxes.frames import HEADER, MAX_FRAME, FrameError, encode_frame

PROTOCOL = 1
CHALLENGE_BYTES = 32
MIN_SECRET_CHARS = 32
# How long connecting and the handshake may take.
CONNECT_TIMEOUT_S = 10.0
# Beyond a job's own wall limit: waiting for a worker, starting one, the runner's grace.
RESULT_SLACK_S = 120.0
# Beyond a request's own timeout (the runner enforces that one and answers).
REQUEST_SLACK_S = 30.0
LIMIT_FIELDS = tuple(f.name for f in fields(Limits))
# Errors the runner reports, by kind, back into the interface's exception types.
ERROR_KINDS: dict[str, type[SandboxError]] = {
    "busy": SandboxBusy,
    "unavailable": SandboxUnavailable,
    "error": SandboxError,
}


class ProtocolError(SandboxError):
    """The peer sent something that is not this protocol (or lost the connection)."""

    cause = "sandboxd_protocol"


# ----------------------------------------------------------------------------- the wire


def mac(secret: bytes, role: str, server_challenge: str, client_challenge: str) -> str:
    """What `role` ("client" or "server") sends to prove it holds the secret."""
    message = f"assay-sandboxd/{PROTOCOL}|{role}|{server_challenge}|{client_challenge}".encode()
    return hmac.new(secret, message, hashlib.sha256).hexdigest()


def challenge() -> str:
    return secrets.token_hex(CHALLENGE_BYTES)


def send_frame(sock: socket.socket, obj: Any) -> None:
    try:
        sock.sendall(encode_frame(obj))
    except OSError as exc:
        raise ProtocolError("the connection to the sandbox runner closed") from exc


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    chunks = []
    while n:
        chunk = sock.recv(min(n, 1 << 20))
        if not chunk:
            raise ProtocolError("the connection to the sandbox runner closed")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def recv_frame(sock: socket.socket, timeout_s: float | None) -> dict[str, Any]:
    """The next frame; ProtocolError on a closed, timed-out or malformed stream."""
    sock.settimeout(timeout_s)
    try:
        (size,) = HEADER.unpack(_recv_exact(sock, HEADER.size))
        if size > MAX_FRAME:
            raise FrameError(f"frame of {size} bytes exceeds {MAX_FRAME}")
        frame = json.loads(_recv_exact(sock, size))
    except TimeoutError as exc:
        raise ProtocolError("the sandbox runner did not answer in time", cause="sandboxd_unresponsive") from exc
    except (OSError, ValueError, RecursionError) as exc:
        if isinstance(exc, ProtocolError):
            raise
        raise ProtocolError("the sandbox runner's stream broke") from exc
    if not isinstance(frame, dict):
        raise ProtocolError("a frame must be a JSON object")
    return frame


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def result_to_wire(result: JobResult) -> dict[str, Any]:
    out = asdict(result)
    out["stdout"], out["stderr"] = b64(result.stdout), b64(result.stderr)
    out["call"] = isinstance(result, CallResult)
    return out


def result_from_wire(data: Any) -> CallResult:
    if not isinstance(data, dict):
        raise ProtocolError("a result must be an object")
    known = {f.name for f in fields(CallResult)}
    try:
        values = {k: v for k, v in data.items() if k in known}
        values["stdout"] = base64.b64decode(values.get("stdout") or "")
        values["stderr"] = base64.b64decode(values.get("stderr") or "")
        values["violations"] = [str(v) for v in values.get("violations") or []]
        return CallResult(**values)
    except (TypeError, ValueError) as exc:
        raise ProtocolError("a malformed result") from exc


def raise_reported(frame: dict[str, Any]) -> None:
    """Raise the interface's exception for an `error` frame from the runner."""
    kind = ERROR_KINDS.get(str(frame.get("kind")), SandboxError)
    cause = frame.get("cause")
    raise kind(f"sandbox runner: {str(frame.get('message'))[:300]}", cause=cause if isinstance(cause, str) else None)


def read_secret(path: str | Path) -> bytes:
    try:
        text = Path(path).read_text().strip()
    except OSError as exc:
        raise SandboxUnavailable(f"cannot read the sandbox runner's secret in {path}: {exc.strerror}",
                                 cause="sandboxd_secret") from exc
    if len(text) < MIN_SECRET_CHARS:
        raise SandboxUnavailable(f"the sandbox runner's secret in {path} is shorter than {MIN_SECRET_CHARS} characters")
    return text.encode()


@dataclass(frozen=True)
class Address:
    """`unix:///path/to/socket` or `tcp://host:port`."""

    family: int
    target: Any

    @classmethod
    def parse(cls, url: str) -> Address:
        if url.startswith("unix://"):
            return cls(socket.AF_UNIX, url.removeprefix("unix://"))
        if url.startswith("tcp://"):
            host, _, port = url.removeprefix("tcp://").rpartition(":")
            if host and port.isdigit():
                return cls(socket.AF_INET, (host.strip("[]"), int(port)))
        raise ValueError(f"sandbox runner address {url!r}: use unix:///PATH or tcp://HOST:PORT")


# ------------------------------------------------------------------------------ client


class RemoteSandbox(Sandbox):
    """A `Sandbox` whose every job runs in a sandbox runner reached at `url`."""

    def __init__(self, url: str, secret: bytes, *, connect_timeout_s: float = CONNECT_TIMEOUT_S) -> None:
        if len(secret) < MIN_SECRET_CHARS:
            raise SandboxUnavailable(f"the sandbox runner's secret must have at least {MIN_SECRET_CHARS} characters")
        self.url = url
        self.address = Address.parse(url)
        self._secret = secret
        self._connect_timeout_s = connect_timeout_s
        # Fails now (SandboxUnavailable) when the runner is missing or refuses us.
        self.runner = self._info()["describe"]
        self.name = str(self.runner.get("backend", "remote"))
        self.workers = int(self.runner.get("workers_per_pool") or self.runner.get("workers") or 2)

    # -- connections

    def _connect(self, op: dict[str, Any]) -> socket.socket:
        """A connection on which both sides have proved the secret and `op` was sent."""
        sock = socket.socket(self.address.family, socket.SOCK_STREAM)
        try:
            sock.settimeout(self._connect_timeout_s)
            sock.connect(self.address.target)
            if self.address.family == socket.AF_INET:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
            hello = recv_frame(sock, self._connect_timeout_s)
            if hello.get("t") != "hello" or hello.get("v") != PROTOCOL or not isinstance(hello.get("challenge"), str):
                raise SandboxUnavailable("the peer is not a sandbox runner of this version", cause="sandboxd_refused")
            ours = challenge()
            proof = mac(self._secret, "client", hello["challenge"], ours)
            send_frame(sock, {"t": "auth", "challenge": ours, "mac": proof, "op": op})
            reply = recv_frame(sock, self._connect_timeout_s)
            if reply.get("t") == "refused":
                raise SandboxUnavailable(f"the sandbox runner refused: {str(reply.get('reason'))[:200]}",
                                         cause="sandboxd_refused")
            expected = mac(self._secret, "server", hello["challenge"], ours)
            if reply.get("t") != "ok" or not hmac.compare_digest(str(reply.get("mac")), expected):
                raise SandboxUnavailable("the sandbox runner did not prove the deployment secret",
                                         cause="sandboxd_unauthenticated")
            return sock
        except OSError as exc:
            sock.close()
            raise SandboxUnavailable(f"cannot reach the sandbox runner at {self.url}: {exc.strerror or exc}",
                                     cause="sandboxd_unreachable") from exc
        except BaseException:
            sock.close()
            raise

    def _one_answer(self, op: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        sock = self._connect(op)
        try:
            return _expect_result(recv_frame(sock, timeout_s))
        finally:
            sock.close()

    def _info(self) -> dict[str, Any]:
        return self._one_answer({"op": "info"}, self._connect_timeout_s)

    # -- the Sandbox interface

    def run(self, job: Job) -> JobResult:
        op = {"op": "run", "command": list(job.command), "files": {k: b64(v) for k, v in job.files.items()},
              "stdin": b64(job.stdin), "env": dict(job.env), "limits": job.limits.to_dict()}
        result = result_from_wire(self._one_answer(op, job.limits.wall_s + RESULT_SLACK_S)["result"])
        return JobResult(**{f.name: getattr(result, f.name) for f in fields(JobResult)})

    def call(self, target: str, payload: Any, limits: Limits, *, pool: str = "default",
             preload: tuple[str, ...] = (), on_message: MessageHandler | None = None) -> CallResult:
        op = _call_op("call", target, payload, limits, pool, preload) | {"relay": on_message is not None}
        sock = self._connect(op)
        deadline = time.monotonic() + limits.wall_s + RESULT_SLACK_S
        try:
            while True:
                frame = recv_frame(sock, max(0.0, deadline - time.monotonic()))
                if frame.get("t") != "ask" or on_message is None:
                    return result_from_wire(_expect_result(frame)["result"])
                try:
                    reply = on_message(frame.get("body"))
                except BaseException:
                    # The trusted side failed: the runner ends the job; re-raise ours.
                    send_frame(sock, {"t": "fail"})
                    raise
                send_frame(sock, {"t": "ans", "body": reply})
        finally:
            sock.close()

    def open(self, target: str, payload: Any, limits: Limits, *, pool: str = "default",
             preload: tuple[str, ...] = ()) -> CallSession:
        sock = self._connect(_call_op("open", target, payload, limits, pool, preload))
        try:
            _expect(recv_frame(sock, limits.wall_s + RESULT_SLACK_S), "opened")
        except BaseException:
            sock.close()
            raise
        return RemoteCallSession(sock, limits)

    def warm(self, pool: str, preload: tuple[str, ...] = ()) -> None:
        self._one_answer({"op": "warm", "pool": pool, "preload": list(preload)}, RESULT_SLACK_S * 2)

    def pool_stats(self) -> dict[str, dict[str, int]]:
        try:
            return dict(self._info().get("pools") or {})
        except SandboxError:
            return {}

    def describe(self) -> dict[str, Any]:
        # Served by the unauthenticated /readyz: the runner's address stays out of it.
        return {**self.runner, "via": "sandboxd"}

    def close(self) -> None:
        """Nothing is held between operations (open sessions close themselves)."""


class RemoteCallSession(CallSession):
    """A call session held open in the runner over one connection."""

    def __init__(self, sock: socket.socket, limits: Limits) -> None:
        self._sock = sock
        self._deadline = time.monotonic() + limits.wall_s + RESULT_SLACK_S
        self._done: CallResult | None = None
        self._lock = threading.Lock()

    def _remaining(self) -> float:
        return max(0.0, self._deadline - time.monotonic())

    def request(self, message: Any, timeout_s: float | None = None) -> Any:
        with self._lock:
            if self._done is not None:
                raise CallEnded(self._done)
            send_frame(self._sock, {"t": "req", "body": message, "timeout_s": timeout_s})
            wait = self._remaining() if timeout_s is None else min(self._remaining(), timeout_s + REQUEST_SLACK_S)
            frame = recv_frame(self._sock, wait)
            if frame.get("t") == "ans":
                return frame.get("body")
            if frame.get("t") == "ended":
                self._done = result_from_wire(frame.get("result")) if frame.get("result") is not None else None
                self._sock.close()
                raise (RequestTimeout if frame.get("timeout") else CallEnded)(self._done)
            _expect_result(frame)
            raise ProtocolError("the sandbox runner answered a request with something else")

    def _end(self, kind: str) -> CallResult:
        with self._lock:
            if self._done is None:
                try:
                    send_frame(self._sock, {"t": kind})
                    self._done = result_from_wire(_expect_result(recv_frame(self._sock, self._remaining()))["result"])
                finally:
                    self._sock.close()
            return self._done

    def finish(self) -> CallResult:
        return self._end("finish")

    def abort(self) -> CallResult:
        return self._end("abort")


def _call_op(op: str, target: str, payload: Any, limits: Limits, pool: str, preload: tuple[str, ...]) -> dict[str, Any]:
    return {"op": op, "target": target, "payload": payload, "limits": limits.to_dict(), "pool": pool,
            "preload": list(preload)}


def _expect_result(frame: dict[str, Any]) -> dict[str, Any]:
    return _expect(frame, "result")


def _expect(frame: dict[str, Any], kind: str) -> dict[str, Any]:
    if frame.get("t") == "error":
        raise_reported(frame)
    if frame.get("t") != kind:
        raise ProtocolError(f"the sandbox runner sent {str(frame.get('t'))[:40]!r} where {kind!r} was due")
    return frame

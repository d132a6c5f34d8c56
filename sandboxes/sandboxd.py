"""`sandboxd`: the sandbox runner, the only process that holds the Docker socket.

    python -m sandboxes.sandboxd --listen tcp://0.0.0.0:7070 --secret-file /run/assay-sandboxd/secret \\
        --backend docker --image assay-runtime:latest --workers 2 [--runtime runsc]

It owns one sandbox backend (`docker`, or `process` for tests and single hosts) and serves
`sandboxes/remote.py`'s protocol: every connection proves the per-deployment secret, then
asks for one operation of a fixed, narrow set (`info`, `warm`, `run`, `call`, `open`).
Requests are checked field by field: unknown fields are refused, limits above the
runner's ceiling are refused, and a call may only name a function of the `verifiers` or
`sandboxes` packages. Image, runtime, mounts, network and capabilities are the runner's
own configuration; no request can change them. Standard library plus the backend's own
needs: this module never imports `service` (it holds no database URL and no API key).
"""

from __future__ import annotations

import argparse
import contextlib
import hmac
import logging
import os
import re
import signal
import socket
import socketserver
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sandboxes.base import (
    CallEnded,
    CallSession,
    Job,
    Limits,
    RequestTimeout,
    Sandbox,
    SandboxBusy,
    SandboxError,
    SandboxUnavailable,
)
from sandboxes.remote import (
    LIMIT_FIELDS,
    PROTOCOL,
    REQUEST_SLACK_S,
    Address,
    ProtocolError,
    challenge,
    mac,
    read_secret,
    recv_frame,
    result_to_wire,
    send_frame,
)

log = logging.getLogger("assay.sandboxd")

CONNECT_TIMEOUT_S = 10.0
MAX_CONNECTIONS = 512
SECRET_BYTES = 32
TARGET = re.compile(r"^(verifiers|sandboxes)(\.[A-Za-z_][A-Za-z0-9_]*)+:[A-Za-z_][A-Za-z0-9_]*$")
MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
POOL = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
# The most any request may ask for (flags raise or lower it).
CEILING = Limits(wall_s=900.0, cpu_s=900.0, memory_mb=8192, processes=256, output_bytes=64_000_000,
                 file_size_mb=1024, open_files=1024, scratch_mb=2048)
# The only fields each operation may carry.
FIELDS: dict[str, frozenset[str]] = {
    "info": frozenset({"op"}),
    "warm": frozenset({"op", "pool", "preload"}),
    "run": frozenset({"op", "command", "files", "stdin", "env", "limits"}),
    "call": frozenset({"op", "target", "payload", "limits", "pool", "preload", "relay"}),
    "open": frozenset({"op", "target", "payload", "limits", "pool", "preload"}),
}


class Refused(ValueError):
    """A request this runner does not serve (shape, fields, target or limits)."""


# ------------------------------------------------------------------- request checks


def _limits(data: Any, ceiling: Limits) -> Limits:
    if not isinstance(data, dict) or set(data) - set(LIMIT_FIELDS):
        raise Refused(f"limits must be an object with fields among {', '.join(LIMIT_FIELDS)}")
    values: dict[str, Any] = {}
    for name, value in data.items():
        top = getattr(ceiling, name)
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= top:
            raise Refused(f"limits.{name} must be a number in (0, {top}]")
        values[name] = type(top)(value)
    return Limits(**values)


def _strings(data: Any, what: str) -> list[str]:
    if not isinstance(data, list) or not all(isinstance(item, str) for item in data):
        raise Refused(f"{what} must be a list of strings")
    return data


def _pool(op: dict[str, Any]) -> tuple[str, tuple[str, ...]]:
    pool = op.get("pool", "default")
    if not isinstance(pool, str) or not POOL.match(pool):
        raise Refused("pool must be a short name")
    preload = tuple(_strings(op.get("preload", []), "preload"))
    if not all(MODULE.match(name) for name in preload):
        raise Refused("preload must name modules")
    return pool, preload


def _target(op: dict[str, Any]) -> str:
    target = op.get("target")
    if not isinstance(target, str) or not TARGET.match(target):
        raise Refused("target must be module:function of the verifiers or sandboxes packages")
    return target


def _job(op: dict[str, Any], ceiling: Limits) -> Job:
    import base64
    import binascii

    command = _strings(op.get("command"), "command")
    if not command:
        raise Refused("command must not be empty")
    files, env = op.get("files", {}), op.get("env", {})
    if not isinstance(files, dict) or not all(isinstance(v, str) for v in files.values()):
        raise Refused("files must map names to base64 text")
    if not isinstance(env, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
        raise Refused("env must map strings to strings")
    try:
        decoded = {str(k): base64.b64decode(v, validate=True) for k, v in files.items()}
        stdin = base64.b64decode(op.get("stdin", ""), validate=True)
    except (binascii.Error, TypeError) as exc:
        raise Refused("files and stdin must be base64") from exc
    return Job(command=command, files=decoded, stdin=stdin, env=env, limits=_limits(op.get("limits"), ceiling))


def check(op: Any) -> str:
    """The operation's name, once its field set is one this runner serves."""
    if not isinstance(op, dict) or op.get("op") not in FIELDS:
        raise Refused(f"op must be one of {', '.join(FIELDS)}")
    extra = set(op) - FIELDS[op["op"]]
    if extra:
        raise Refused(f"unexpected fields for {op['op']}: {', '.join(sorted(map(str, extra)))[:200]}")
    return op["op"]


# ---------------------------------------------------------------------------- serving


@dataclass
class Runner:
    """What every connection shares: the backend, the secret, the ceiling."""

    sandbox: Sandbox
    secret: bytes
    ceiling: Limits = CEILING

    def describe(self) -> dict[str, Any]:
        return {**self.sandbox.describe(), "workers": int(getattr(self.sandbox, "workers", 0) or 0),
                "ceiling": self.ceiling.to_dict()}


def _error_frame(exc: SandboxError) -> dict[str, Any]:
    kind = "busy" if isinstance(exc, SandboxBusy) else "unavailable" if isinstance(exc, SandboxUnavailable) else "error"
    return {"t": "error", "kind": kind, "cause": exc.cause, "message": str(exc)[:300]}


class Connection:
    """One authenticated operation on one connection."""

    def __init__(self, runner: Runner, sock: socket.socket) -> None:
        self.runner = runner
        self.sock = sock

    def serve(self) -> None:
        ours = challenge()
        send_frame(self.sock, {"t": "hello", "v": PROTOCOL, "challenge": ours})
        auth = recv_frame(self.sock, CONNECT_TIMEOUT_S)
        theirs = auth.get("challenge")
        if auth.get("t") != "auth" or not isinstance(theirs, str) or not hmac.compare_digest(
                str(auth.get("mac")), mac(self.runner.secret, "client", ours, theirs)):
            log.warning("refused a connection that did not prove the deployment secret")
            send_frame(self.sock, {"t": "refused", "reason": "authentication failed"})
            return
        op = auth.get("op")
        try:
            name = check(op)
        except Refused as exc:
            log.warning("refused a request: %s", exc)
            send_frame(self.sock, {"t": "refused", "reason": str(exc)})
            return
        send_frame(self.sock, {"t": "ok", "mac": mac(self.runner.secret, "server", ours, theirs)})
        try:
            getattr(self, f"_{name}")(op)
        except Refused as exc:
            log.warning("refused a request: %s", exc)
            send_frame(self.sock, {"t": "error", "kind": "error", "cause": "sandboxd_refused", "message": str(exc)})
        except SandboxError as exc:
            send_frame(self.sock, _error_frame(exc))

    # -- operations

    def _info(self, _op: dict[str, Any]) -> None:
        send_frame(self.sock, {"t": "result", "describe": self.runner.describe(),
                               "pools": self.runner.sandbox.pool_stats()})

    def _warm(self, op: dict[str, Any]) -> None:
        pool, preload = _pool(op)
        self.runner.sandbox.warm(pool, preload)
        send_frame(self.sock, {"t": "result"})

    def _run(self, op: dict[str, Any]) -> None:
        result = self.runner.sandbox.run(_job(op, self.runner.ceiling))
        send_frame(self.sock, {"t": "result", "result": result_to_wire(result)})

    def _call(self, op: dict[str, Any]) -> None:
        target, limits, (pool, preload) = _target(op), _limits(op.get("limits"), self.runner.ceiling), _pool(op)
        self._relay_timeout_s = limits.wall_s + REQUEST_SLACK_S
        relay = self._relay if op.get("relay") is True else None
        result = self.runner.sandbox.call(target, op.get("payload"), limits, pool=pool, preload=preload,
                                          on_message=relay)
        send_frame(self.sock, {"t": "result", "result": result_to_wire(result)})

    def _relay(self, body: Any) -> Any:
        """A message from the sandboxed function: the caller answers it."""
        send_frame(self.sock, {"t": "ask", "body": body})
        frame = recv_frame(self.sock, self._relay_timeout_s)
        if frame.get("t") != "ans":
            raise ProtocolError("the caller failed to answer a relayed message")
        return frame.get("body")

    def _open(self, op: dict[str, Any]) -> None:
        target, limits, (pool, preload) = _target(op), _limits(op.get("limits"), self.runner.ceiling), _pool(op)
        session = self.runner.sandbox.open(target, op.get("payload"), limits, pool=pool, preload=preload)
        try:
            send_frame(self.sock, {"t": "opened"})
            self._hold(session)
        finally:
            # A caller that went away leaves nothing running.
            with contextlib.suppress(SandboxError):
                session.abort()

    def _hold(self, session: CallSession) -> None:
        while True:
            frame = recv_frame(self.sock, None)
            kind = frame.get("t")
            if kind in ("finish", "abort"):
                result = session.finish() if kind == "finish" else session.abort()
                send_frame(self.sock, {"t": "result", "result": result_to_wire(result)})
                return
            if kind != "req":
                raise ProtocolError("a session carries req, finish or abort")
            timeout_s = frame.get("timeout_s")
            if timeout_s is not None and (isinstance(timeout_s, bool) or not isinstance(timeout_s, int | float)
                                          or timeout_s <= 0):
                raise Refused("timeout_s must be a positive number")
            try:
                answer = session.request(frame.get("body"), timeout_s=timeout_s)
            except CallEnded as ended:
                send_frame(self.sock, {"t": "ended", "timeout": isinstance(ended, RequestTimeout),
                                       "result": None if ended.result is None else result_to_wire(ended.result)})
                return
            send_frame(self.sock, {"t": "ans", "body": answer})


def _handler(runner: Runner, slots: threading.BoundedSemaphore) -> type[socketserver.BaseRequestHandler]:
    class Handler(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            sock: socket.socket = self.request
            if sock.family != socket.AF_UNIX:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
            if not slots.acquire(blocking=False):
                with contextlib.suppress(SandboxError):
                    send_frame(sock, {"t": "refused", "reason": "too many connections"})
                return
            try:
                Connection(runner, sock).serve()
            except ProtocolError as exc:
                log.info("connection ended: %s", exc)
            except Exception:
                log.exception("sandbox runner: an operation failed")
            finally:
                slots.release()

    return Handler


class _TCPServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128


class _UnixServer(socketserver.ThreadingUnixStreamServer):
    daemon_threads = True
    request_queue_size = 128


def make_server(runner: Runner, listen: str, max_connections: int = MAX_CONNECTIONS) -> socketserver.BaseServer:
    """A threaded server for `runner` at `listen` (unix:///path or tcp://host:port)."""
    address = Address.parse(listen)
    handler = _handler(runner, threading.BoundedSemaphore(max_connections))
    if address.family == socket.AF_UNIX:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(address.target)
        server: socketserver.BaseServer = _UnixServer(address.target, handler)
        # Who may connect is decided by the secret; the mode keeps other users out as well.
        os.chmod(address.target, 0o660)
        return server
    return _TCPServer(address.target, handler)


def ensure_secret(path: Path) -> bytes:
    """The secret in `path`, written first (random, readable by those who mount it) when absent."""
    if not path.exists() or not path.read_text().strip():
        path.parent.mkdir(parents=True, exist_ok=True)
        part = path.with_name(path.name + ".part")
        part.write_text(os.urandom(SECRET_BYTES).hex())
        part.chmod(0o444)
        part.replace(path)
    return read_secret(path)


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="sandboxd", description="Assay's sandbox runner.")
    p.add_argument("--listen", required=True, help="unix:///PATH or tcp://HOST:PORT")
    p.add_argument("--secret-file", required=True, type=Path, help="the per-deployment secret")
    p.add_argument("--generate-secret", action="store_true", help="write a random secret first when the file is absent")
    p.add_argument("--backend", choices=("docker", "process"), default="docker")
    p.add_argument("--image", default="assay-runtime:latest")
    p.add_argument("--runtime", default=None, help="OCI runtime of sandbox containers, e.g. runsc (gVisor)")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--host-label", default=None)
    p.add_argument("--container-max-jobs", type=int, default=None)
    p.add_argument("--unsafe-no-isolation", action="store_true")
    p.add_argument("--max-connections", type=int, default=MAX_CONNECTIONS)
    for name in LIMIT_FIELDS:
        p.add_argument(f"--max-{name.replace('_', '-')}", type=type(getattr(CEILING, name)),
                       default=getattr(CEILING, name), help=f"ceiling of limits.{name}")
    p.add_argument("--log-level", default="info")
    return p.parse_args(argv)


def main(argv: list[str] | None = None, on_ready: Callable[[], None] | None = None) -> int:
    args = _parse(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from sandboxes.factory import create_sandbox

    try:
        secret = ensure_secret(args.secret_file) if args.generate_secret else read_secret(args.secret_file)
        sandbox = create_sandbox(args.backend, workers=args.workers, image=args.image, runtime=args.runtime,
                                 unsafe_no_isolation=args.unsafe_no_isolation, host_label=args.host_label,
                                 container_max_jobs=args.container_max_jobs)
    except (OSError, SandboxError) as exc:
        print(f"sandboxd: {exc}", file=sys.stderr)
        return 2
    ceiling = Limits(**{name: getattr(args, f"max_{name}") for name in LIMIT_FIELDS})
    server = make_server(Runner(sandbox, secret, ceiling), args.listen, args.max_connections)
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown, daemon=True).start())
    log.info("sandboxd serving %s on %s", sandbox.describe(), args.listen)
    if on_ready is not None:
        on_ready()
    try:
        server.serve_forever()
    finally:
        server.server_close()
        sandbox.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

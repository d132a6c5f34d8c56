"""The candidate side: runs untrusted code inside the candidate sandbox pool.

Everything in this process is untrusted once the candidate's code has run: it may patch
this module, the channel, or the encoder. That is by design harmless, because this
process never holds tests, expected outputs or the verdict: it only answers
"call f(args)" with plain data that the grader decodes and judges, and a lie here can
only fail the candidate's own tests.

An audit hook records what the code attempted (network, signals, file writes, process
creation, introspection) so the trusted side can raise flags. The hook is advisory: code
that disables it only hides evidence against itself; the kernel-level sandbox is what
actually prevents the attempts.

Standard library only (plus our stdlib-only `values`).
"""

from __future__ import annotations

import builtins
import contextlib
import io
import json
import os
import sys
import traceback
from typing import Any

from verifiers.code.inside import values
from verifiers.code.inside.streams import stdin_descriptor
from verifiers.code.wire import (  # noqa: F401  (re-exported names the candidate side uses)
    AUDIT_KINDS,
    AUDIT_MARKER,
    COMMON_MODULES,
    MAX_EXCEPTION_BASES,
    MAX_EXPORTS,
)

MESSAGE_CHARS = 300
# Bounds on what the audit report carries back.
MAX_AUDIT_PATHS = 8
AUDIT_PATH_CHARS = 120

_NETWORK = {"socket.connect", "socket.bind", "socket.sendto", "socket.sendmsg", "socket.getaddrinfo"}
_SPAWN = {"os.fork", "os.forkpty", "os.system", "os.posix_spawn", "os.spawn", "os.exec", "subprocess.Popen"}
_KILL = {"os.kill", "os.killpg", "signal.pthread_kill"}
_INTROSPECT = {"gc.get_objects", "gc.get_referrers", "gc.get_referents", "sys._current_frames", "sys.settrace",
               "sys.setprofile", "ctypes.dlopen", "ctypes.dlsym"}
_FILE_CHANGE = {"os.remove", "os.rename", "os.rmdir", "os.truncate", "os.chmod", "shutil.rmtree", "os.unlink"}

# Every exception class of builtins, taken before any candidate code runs.
_BUILTIN_EXCEPTIONS = tuple(v for v in vars(builtins).values() if isinstance(v, type) and issubclass(v, BaseException))
# type's own descriptors: a metaclass cannot override these reads.
_TYPE_MRO = type.__dict__["__mro__"].__get__
_TYPE_NAME = type.__dict__["__name__"].__get__
# The largest encoded value a call returns (the channel carries a little more).
MAX_VALUE_BYTES = 12 * 1024 * 1024

_events: dict[str, int] = {}
_paths: list[str] = []


def _note(kind: str, path: str | None = None) -> None:
    if kind not in _events:
        # Also on stderr, which the sandbox captures even when the process is killed
        # (a fork bomb or a busy loop never gets to answer with its audit report).
        with contextlib.suppress(OSError):
            os.write(2, f"\n{AUDIT_MARKER}{kind}\n".encode())
    _events[kind] = _events.get(kind, 0) + 1
    if path is not None and len(_paths) < MAX_AUDIT_PATHS:
        _paths.append(path[:AUDIT_PATH_CHARS])


def _audit(event: str, args: tuple) -> None:
    if event in _NETWORK:
        _note("network")
    elif event in _SPAWN:
        _note("spawn")
    elif event in _KILL:
        # Signalling oneself (e.g. os.kill(os.getpid(), ...)) is not an attack on others.
        if not (args and args[0] == os.getpid()):
            _note("kill")
    elif event in _INTROSPECT:
        _note("introspection")
    elif event in _FILE_CHANGE:
        _note("file_write", str(args[0]) if args else None)
    elif event == "open" and len(args) >= 2:
        path, mode = args[0], args[1]
        writing = isinstance(mode, str) and any(c in mode for c in "wax+")
        if not writing and isinstance(args[-1], int) and len(args) >= 3:
            writing = bool(args[-1] & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC))
        if writing and isinstance(path, str | bytes):
            text = os.fsdecode(path)
            _note("tamper_file" if text.endswith(".py") or "conftest" in text else "file_write", text)


def _start_audit() -> None:
    sys.addaudithook(_audit)


def report() -> dict[str, Any]:
    return {"events": dict(_events), "paths": list(_paths)}


def _describe(exc: BaseException) -> dict[str, Any]:
    """The exception as plain data. Its class is the candidate's: a metaclass can make
    `__name__`, `__mro__` or `__str__` raise or lie, so only real builtins and real
    strings are named (the grader trusts none of it anyway)."""
    # Builtin ancestors let the grader re-raise e.g. a ValueError subclass as ValueError.
    kind = type(exc)
    bases = [b.__name__ for k in _TYPE_MRO(kind) for b in _BUILTIN_EXCEPTIONS if k is b]
    try:
        name = _TYPE_NAME(kind)
    except BaseException:  # noqa: BLE001
        name = None
    try:
        message = str(exc)[:MESSAGE_CHARS]
    except BaseException:  # a hostile __str__ must not take the harness down
        message = "<unprintable>"
    return {"type": name[:MESSAGE_CHARS] if type(name) is str else "<unnamed>", "bases": bases[:MAX_EXCEPTION_BASES],
            "message": message if type(message) is str else "<unprintable>",
            "exit": isinstance(exc, SystemExit | KeyboardInterrupt | GeneratorExit)}


def _export(value: Any) -> dict[str, Any] | None:
    if type(value) is type(os):
        module = value.__dict__.get("__name__")
        return {"kind": "module", "module": module} if type(module) is str else None
    if callable(value):
        return {"kind": "callable"}
    # Never drained: the module's own generators stay unconsumed for its functions.
    return {"kind": "value", "value": _plain(value, iterators=False)}


def _plain(value: Any, iterators: bool = True) -> Any:
    """values.encode, bounded in encoded size (Unencodable when over)."""
    encoded = values.encode(value, iterators=iterators)
    if len(json.dumps(encoded, separators=(",", ":"))) > MAX_VALUE_BYTES:
        raise values.Unencodable(f"value larger than {MAX_VALUE_BYTES} bytes once encoded")
    return encoded


def _exports(namespace: dict[str, Any]) -> dict[str, Any]:
    """Names the tests may take from the candidate's module: callables become proxies in
    the grader, plain data is copied, stdlib modules are re-imported there by name.
    Whatever the module holds (objects whose attributes raise or lie), this returns."""
    out: dict[str, Any] = {}
    budget = MAX_VALUE_BYTES
    for name, value in list(namespace.items()):
        if type(name) is not str or name.startswith("__") or not name.isidentifier() or len(out) >= MAX_EXPORTS:
            continue
        try:
            found = _export(value)
            size = len(json.dumps(found, separators=(",", ":"))) if found else 0
        except BaseException:  # noqa: BLE001 - the candidate's objects; it is their loss
            continue
        if found is not None and size <= budget:
            budget -= size
            out[name] = found
    return out


def serve(payload: dict[str, Any], channel: Any) -> dict[str, Any]:
    """Load the candidate module, then answer the host's `load` and `call` requests."""
    namespace: dict[str, Any] = {"__name__": payload.get("module_name") or "solution", "__builtins__": builtins}
    _start_audit()
    load_error: dict[str, Any] | None = None
    try:
        exec(compile(payload["code"], "<solution>", "exec"), namespace)
    except BaseException as exc:
        load_error = _describe(exc)
        traceback.print_exc()

    def handle(message: Any) -> Any:
        op = message.get("op") if isinstance(message, dict) else None
        if op == "load":
            exports = _exports(namespace) if load_error is None else {}
            return {"ok": load_error is None, "error": load_error, "exports": exports, "audit": report()}
        if op != "call":
            return {"ok": False, "error": {"type": "ProtocolError", "message": "unknown op", "bases": []}}
        try:
            func = namespace[message["name"]]
            args = values.decode(message.get("args") or [])
            kwargs = values.decode(message.get("kwargs") or {"$dict": []})
            result = _plain(func(*args, **kwargs))
            return {"ok": True, "value": result, "audit": report()}
        except BaseException as exc:
            traceback.print_exc()
            return {"ok": False, "error": _describe(exc), "audit": report()}

    channel.serve(handle)
    return {"audit": report()}


def run_program(payload: dict[str, Any], channel: Any) -> dict[str, Any]:
    """Run a stdin/stdout program. Its stdout goes to the sandbox's captured fd 1 and is
    compared on the trusted host; the expected output never enters this process."""
    # A seekable fd 0 serves input(), sys.stdin and open(0) alike, whatever the size, and
    # open('/dev/stdin') too (streams.py).
    fd = stdin_descriptor(payload.get("stdin", "").encode())
    os.dup2(fd, 0)
    os.close(fd)
    sys.stdin = io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "r", closefd=False)), encoding="utf-8")
    # As `python solution.py < input` runs it: no arguments. The worker's own command line would send
    # fileinput, argparse or `sys.argv[1]` to a file that is not there.
    sys.argv = ["solution.py"]
    namespace: dict[str, Any] = {"__name__": "__main__", "__builtins__": builtins}
    _start_audit()
    status: dict[str, Any] = {"status": "ok"}
    try:
        exec(compile(payload["code"], "<solution>", "exec"), namespace)
    except SystemExit as exc:
        # Competitive programs often end with sys.exit(); only a failing code is an error.
        if exc.code not in (None, 0):
            status = {"status": "exit", "error": _describe(exc)}
    except BaseException as exc:
        traceback.print_exc()
        status = {"status": "error", "error": _describe(exc)}
    finally:
        with contextlib.suppress(BaseException):
            sys.stdout.flush()
    status["audit"] = report()
    return status

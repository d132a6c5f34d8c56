"""The grader side: runs the task's test code inside the grader sandbox pool.

This process holds the tests and decides pass/fail, and no candidate code ever runs in
it. Each `candidate(...)` call (and each other name the tests take from the candidate's
module) is a proxy that sends the arguments as plain data through the trusted host to
the separate candidate process and decodes the reply into built-in values. So the
candidate cannot patch `check`, `AssertionError` or this harness, cannot read the tests
from any frame or file, and cannot hand back an object with a rigged `__eq__`.

An exception the candidate raised is re-raised here as a built-in type, except that
nothing from the candidate can end the tests' iteration (`map`, `filter`, a `for` over
an iterator whose `__next__` calls it, an `async for`): StopIteration and
StopAsyncIteration, subclasses included, become RuntimeError, as PEP 479 does for
generators, and exits (SystemExit, KeyboardInterrupt, GeneratorExit) become
`CandidateGone`. Whether the task's own code is broken (the task's 422) is decided from
the task's code alone, before anything of the candidate's module is bound.

Standard library only (plus our stdlib-only `values`).
"""

from __future__ import annotations

import builtins
import importlib
from typing import Any

from verifiers.code.inside import values
from verifiers.code.wire import COMMON_MODULES

TESTS_FILENAME = "<tests>"
PROMPT_FILENAME = "<prompt>"
MESSAGE_CHARS = 300
# Modules a test may take from the candidate's namespace by name (import math in the
# prompt, used bare by the test). Anything else is refused: a candidate must not make
# the grader import arbitrary modules.
_IMPORTABLE = frozenset(COMMON_MODULES) | {"sys", "json", "array", "cmath", "numbers", "textwrap", "unicodedata"}
# Exceptions that end an iteration in the interpreter: never raised on the candidate's
# behalf (PEP 479's rule for generators, applied to every call of candidate code).
ITERATION_ENDERS = (StopIteration, StopAsyncIteration)
MAX_NAME_CHARS = 100


class CandidateGone(BaseException):
    """The candidate process ended, exited or broke protocol during a call.

    A BaseException so that a test's `except Exception:` cannot swallow it: in an
    ordinary run, a program that exits or dies ends the tests with it.
    """


class CandidateError(Exception):
    """The candidate raised an exception that is not a built-in type."""


def _text(value: Any, limit: int) -> str:
    return value[:limit] if isinstance(value, str) else ""


def _rebuild(error: dict[str, Any]) -> BaseException:
    """The candidate's exception as one the tests may catch; never one that ends an
    iteration or the tests (whatever the candidate claims its ancestors are)."""
    message = _text(error.get("message"), MESSAGE_CHARS)
    type_name = _text(error.get("type"), MAX_NAME_CHARS) or "<unnamed>"
    if error.get("exit"):
        return CandidateGone(f"candidate raised {type_name} during the call")
    bases = error.get("bases")
    exc: BaseException | None = None
    for name in bases if isinstance(bases, list) else []:
        kind = getattr(builtins, name, None) if isinstance(name, str) else None
        if not (isinstance(kind, type) and issubclass(kind, Exception)):
            continue
        if issubclass(kind, ITERATION_ENDERS):
            exc = RuntimeError(f"candidate raised {type_name}")
            break
        try:
            exc = kind(message)
        except Exception:  # e.g. UnicodeDecodeError needs five arguments
            continue
        break
    if exc is None:
        exc = CandidateError(f"{type_name}: {message}")
    exc._assay_candidate = True  # type: ignore[attr-defined]
    return exc


def _proxy(channel: Any, name: str, counter: list[int]) -> Any:
    def proxy(*args: Any, **kwargs: Any) -> Any:
        try:
            message = {"op": "call", "name": name, "args": values.encode(list(args)),
                       "kwargs": values.encode(dict(kwargs))}
        except values.Unencodable as exc:
            raise TypeError(f"cannot pass this argument to the candidate: {exc}") from None
        counter[0] += 1
        reply = channel.ask(message)
        # The host wraps the candidate's answer; anything else means the candidate is gone.
        if not isinstance(reply, dict) or "answer" not in reply:
            raise CandidateGone(str(reply.get("gone") if isinstance(reply, dict) else "no reply"))
        answer = reply["answer"]
        if not isinstance(answer, dict):
            raise CandidateGone("malformed answer from the candidate")
        if answer.get("ok") is True:
            try:
                return values.decode(answer.get("value"))
            except (ValueError, TypeError, RecursionError) as exc:
                raise CandidateGone(f"undecodable value from the candidate: {exc}") from None
        error = answer.get("error")
        raise _rebuild(error if isinstance(error, dict) else {})

    proxy.__name__ = proxy.__qualname__ = name
    return proxy


def _bind_exports(namespace: dict[str, Any], exports: Any, channel: Any, counter: list[int]) -> None:
    """Bind what the candidate's module exports to names the task's code left free.
    Exports are the candidate's data: whatever their shape, this never raises."""
    for name, info in exports.items() if isinstance(exports, dict) else ():
        # Never let the candidate shadow a builtin (`abs`, `AssertionError`, `len`...).
        if not (isinstance(name, str) and len(name) <= MAX_NAME_CHARS and name.isidentifier()):
            continue
        if hasattr(builtins, name) or name in namespace or not isinstance(info, dict):
            continue
        kind, module = info.get("kind"), info.get("module")
        try:
            if kind == "callable":
                namespace[name] = _proxy(channel, name, counter)
            elif kind == "value":
                namespace[name] = values.decode(info.get("value"))
            elif kind == "module" and isinstance(module, str) and module in _IMPORTABLE:
                namespace[name] = importlib.import_module(module)
        except Exception:  # malformed data: the name stays unbound  # noqa: BLE001
            continue


def _failure_line(tb: Any) -> int | None:
    line = None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == TESTS_FILENAME:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def _failed(exc: BaseException, counter: list[int]) -> dict[str, Any]:
    if isinstance(exc, CandidateGone):
        return {"status": "gone", "message": str(exc)[:MESSAGE_CHARS], "calls": counter[0]}
    try:
        message = str(exc)[:MESSAGE_CHARS]
    except Exception:  # noqa: BLE001 - the tests' own exception; be safe anyway
        message = "<unprintable>"
    return {
        "status": "fail" if isinstance(exc, AssertionError) else "error",
        "type": type(exc).__name__,
        # A message from the candidate's own exception is the candidate's text; a
        # message built by the test may quote expected values, so it is marked.
        "message": message,
        "from_candidate": bool(getattr(exc, "_assay_candidate", False)),
        "line": _failure_line(exc.__traceback__),
        "calls": counter[0],
    }


def grade(payload: dict[str, Any], channel: Any) -> dict[str, Any]:
    """Run `check(candidate)` from the task's tests against the proxied candidate."""
    counter = [0]
    namespace: dict[str, Any] = {"__name__": "__assay_tests__", "__builtins__": builtins}
    entry_point = payload["entry_point"]
    candidate = _proxy(channel, entry_point, counter)
    # 1. The task's own code, with nothing of the candidate's module bound: the prompt
    # (e.g. HumanEval/32's `poly`), then the tests. If this fails before any call, the
    # task is broken whatever the response is.
    try:
        prompt = payload.get("prompt")
        if prompt:
            exec(compile(prompt, PROMPT_FILENAME, "exec"), namespace)
        namespace[entry_point] = candidate
        exec(compile(payload["tests"], TESTS_FILENAME, "exec"), namespace)
    except BaseException as exc:
        if counter[0] == 0:
            return {"status": "bad_tests", "message": "the task's prompt or tests raised " + type(exc).__name__}
        return _failed(exc, counter)  # the tests called the candidate while loading
    check = namespace.get("check")
    if not callable(check):
        return {"status": "bad_tests", "message": "the tests define no check(candidate)"}
    # 2. Names the tests take from the candidate's module (those the task left free).
    _bind_exports(namespace, payload.get("exports"), channel, counter)
    # 3. The check.
    try:
        check(candidate)
    except BaseException as exc:
        return _failed(exc, counter)
    return {"status": "pass", "calls": counter[0]}
